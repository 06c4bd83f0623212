#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

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

void fiber_make(ucontext_t* ctx, char* stack, ucontext_t* link, void (*entry)()) {
  getcontext(ctx);
  ctx->uc_stack.ss_sp = stack;
  ctx->uc_stack.ss_size = kFiberStack;
  ctx->uc_link = link;
  makecontext(ctx, entry, 0);
}

}  // namespace mslemu
