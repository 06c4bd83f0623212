// Fibers for GPU threads: ucontext contexts on mmap'd stacks (128 KiB + a PROT_NONE guard page below,
// MAP_NORESERVE), allocated once per worker thread and reused for every threadgroup.
#pragma once
#include <ucontext.h>

#include <cstddef>
#include <vector>

namespace mslemu {

constexpr size_t kFiberStack = 128 * 1024;

class StackPool {
 public:
  ~StackPool();
  char* stack(size_t i);  // base of stack i (kFiberStack bytes), allocated on first use

 private:
  std::vector<char*> stacks_;
};

// Prepares `ctx` to run entry() on `stack`; when entry returns, control goes to `link`.
void fiber_make(ucontext_t* ctx, char* stack, ucontext_t* link, void (*entry)());

}  // namespace mslemu
