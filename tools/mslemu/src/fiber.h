// Fibers for GPU threads: one per lane on mmap'd stacks (128 KiB + a PROT_NONE guard page below,
// MAP_NORESERVE), allocated once per worker thread and reused for every threadgroup. The switch is a few
// instructions of assembly on x86-64 and arm64 (glibc's swapcontext makes a sigprocmask system call per
// switch: ~0.4 us here, the emulator's main cost); sanitizer builds and other architectures use ucontext,
// which ASan understands.
#pragma once
#include <cstddef>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MSLEMU_FIBER_UCONTEXT 1
#endif
#endif
#if (!defined(__x86_64__) && !defined(__aarch64__)) || !defined(__ELF__)  // the asm below is ELF (Linux)
#define MSLEMU_FIBER_UCONTEXT 1
#endif
#ifdef MSLEMU_FIBER_UCONTEXT
#include <ucontext.h>
#endif

namespace mslemu {

constexpr size_t kFiberStack = 128 * 1024;

struct Fiber {
#ifdef MSLEMU_FIBER_UCONTEXT
  ucontext_t uc;
#else
  void* sp = nullptr;  // saved stack pointer (callee-saved registers are on that stack)
#endif
};

class StackPool {
 public:
  ~StackPool();
  char* stack(size_t i);  // base of stack i (kFiberStack bytes), allocated on first use

 private:
  std::vector<char*> stacks_;
};

// Prepares `f` to run entry() on `stack` at its next switch-in. entry() must never return: it ends by
// switching away for good.
void fiber_make(Fiber* f, char* stack, void (*entry)());
// Saves the current context into `from` and resumes `to`.
void fiber_switch(Fiber* from, Fiber* to);

}  // namespace mslemu
