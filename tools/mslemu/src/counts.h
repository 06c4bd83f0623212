// The counters' runtime state (counts.cpp): per worker thread, the memory the running dispatch may count
// and where its totals go.
#pragma once
#include <cstdint>

#include "mslemu/abi.h"

namespace mslemu {

struct CountRanges {  // zero-initialised (thread-local storage needs a constant initialiser)
  const char* tg_lo;  // the group's threadgroup arena
  const char* tg_hi;
  int n;              // device buffers bound to pointer parameters
  const char* lo[32];
  const char* hi[32];
};
extern __thread CountRanges t_ranges;
extern __thread Counts* t_counts;  // null: not counting

// This thread's totals since the last call (and resets them).
Counts take_counts();
void add_counts(Counts& to, const Counts& c, uint64_t times);

}  // namespace mslemu
