// The emulator's host API: run one dispatch (dispatchThreadgroups semantics) under a schedule and a
// threadgroup-memory poison; an empty string, or a report naming the kernel, the .metal line and what
// went wrong (deadlock, barrier divergence, divergent simdgroup_matrix op, unbound buffer ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mslemu/abi.h"

namespace mslemu {

// Forward: lanes and groups in index order. Reverse: both reversed, released lanes run before the
// waiting ones. Shuffled: a fresh permutation (seeded) at every release and of the groups.
enum class Schedule { Forward, Reverse, Shuffled };
struct BufBinding {
  int index;
  void* ptr;
  size_t size;
};
struct TgBinding {
  int index;
  size_t bytes;
};
struct Dispatch {
  std::string kernel;
  std::vector<BufBinding> buffers;
  std::vector<TgBinding> tgmem;
  U3 groups{1, 1, 1}, threads{1, 1, 1};
};
struct RunOptions {
  Schedule sched = Schedule::Forward;
  uint64_t seed = 1;
  unsigned char poison = 0xFF;  // fills threadgroup memory before each group
  int workers = 1;              // >1: groups on that many OS threads (Forward only; never for checks)
  // Counting only: run one group of each class (per grid dimension: the first and the last group) and
  // weight its counts by the class's size. Exact for kernels whose work depends on a group's position only
  // through the grid's edges (every tessera kernel); the groups not run leave their outputs unwritten.
  bool count_classes = false;
};
// `counts`, when given, receives what the dispatch did (docs/metal-on-linux.md#counters).
std::string run(const Dispatch& d, const RunOptions& o, Counts* counts = nullptr);

struct Stats {
  uint64_t switches = 0, collectives = 0, barriers = 0;
};
Stats stats();  // totals over all runs in this process
int kernel_count();
const KernelEntry* kernel_at(int i);

}  // namespace mslemu
