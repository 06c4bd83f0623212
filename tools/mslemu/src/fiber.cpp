#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef MSLEMU_FIBER_UCONTEXT
// void mslemu_switch(void** save_sp, void* new_sp): pushes the callee-saved registers, stores the stack
// pointer, loads the other one, pops its registers and returns into it.
extern "C" void mslemu_switch(void** save_sp, void* new_sp);
#if defined(__x86_64__)
asm(R"(
.text
.p2align 4
.globl mslemu_switch
.hidden mslemu_switch
.type mslemu_switch,@function
mslemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size mslemu_switch,.-mslemu_switch
.section .note.GNU-stack,"",@progbits
)");
#elif defined(__aarch64__)
asm(R"(
.text
.p2align 4
.globl mslemu_switch
.hidden mslemu_switch
.type mslemu_switch,%function
mslemu_switch:
  sub sp, sp, #160
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mov x2, sp
  str x2, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #160
  ret
.size mslemu_switch,.-mslemu_switch
.section .note.GNU-stack,"",@progbits
)");
#endif
#endif

namespace mslemu {

static size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

StackPool::~StackPool() {
  for (char* s : stacks_)
    if (s) munmap(s - page_size(), kFiberStack + page_size());
}

char* StackPool::stack(size_t i) {
  if (i >= stacks_.size()) stacks_.resize(i + 1, nullptr);
  if (!stacks_[i]) {
    const size_t guard = page_size();
    void* m = mmap(nullptr, kFiberStack + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "mslemu: cannot map a %zu KiB fiber stack\n", kFiberStack / 1024);
      std::abort();
    }
    mprotect(m, guard, PROT_NONE);  // a stack overflow faults instead of corrupting the neighbour
    stacks_[i] = static_cast<char*>(m) + guard;
  }
  return stacks_[i];
}

#ifdef MSLEMU_FIBER_UCONTEXT
void fiber_make(Fiber* f, char* stack, void (*entry)()) {
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = stack;
  f->uc.uc_stack.ss_size = kFiberStack;
  f->uc.uc_link = nullptr;
  makecontext(&f->uc, entry, 0);
}
void fiber_switch(Fiber* from, Fiber* to) { swapcontext(&from->uc, &to->uc); }
#else
void fiber_make(Fiber* f, char* stack, void (*entry)()) {
  // An initial frame that mslemu_switch "returns" into: saved registers (zero), then entry as the
  // return address, placed so that entry starts with the stack aligned as after a call.
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + kFiberStack) & ~uintptr_t(15);
#if defined(__x86_64__)
  uint64_t* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;                                   // entry's (never used) return address slot: keeps alignment
  *--sp = reinterpret_cast<uint64_t>(entry);   // ret target; at entry rsp % 16 == 8, as after a call
  for (int i = 0; i < 6; i++) *--sp = 0;       // rbp rbx r12 r13 r14 r15
  *--sp = 0;                                   // mxcsr + x87 control word slot
  uint32_t csr;
  uint16_t cw;
  asm volatile("stmxcsr %0" : "=m"(csr));
  asm volatile("fnstcw %0" : "=m"(cw));
  std::memcpy(sp, &csr, 4);
  std::memcpy(reinterpret_cast<char*>(sp) + 4, &cw, 2);
  f->sp = sp;
#else
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 160);
  for (int i = 0; i < 20; i++) sp[i] = 0;
  sp[11] = reinterpret_cast<uint64_t>(entry);  // x30 (lr): where ret goes
  f->sp = sp;
#endif
}
void fiber_switch(Fiber* from, Fiber* to) { mslemu_switch(&from->sp, to->sp); }
#endif

}  // namespace mslemu
