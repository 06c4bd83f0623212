// Internal state of the emulator's runtime, shared by scheduler.cpp (one threadgroup at a time on one
// worker) and run.cpp (dispatch, groups, workers, watchdog, signals).
#pragma once
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fiber.h"
#include "mslemu/run.h"

namespace mslemu {

enum LaneState { RUNNABLE, AT_BARRIER, AT_COLL, DONE, FAILED };
struct Lane {
  Fiber ctx;
  Invocation inv;
  LaneState st = RUNNABLE;
  Site site{nullptr, 0};  // last barrier or collective reached
  Coll op{};
  void* in = nullptr;
  void* out = nullptr;
  long arg = 0;
  CollFn fn = nullptr;
};

// Errors found by the scheduler (its own stack) travel as this exception; errors on a fiber stack are
// recorded and the lane switches away for good (nothing may unwind across contexts).
struct Abort {
  std::string msg;
};

constexpr size_t kTgMemory = 32 * 1024;  // Apple silicon's maxThreadgroupMemoryLength

struct Group {
  std::vector<Lane> lanes;
  Fiber sched;
  KernelFn fn = nullptr;
  const Dispatch* d = nullptr;
  const RunOptions* opt = nullptr;
  std::mt19937_64 rng;
  std::vector<int> queue;
  size_t qhead = 0;
  U3 pos{0, 0, 0};
  alignas(64) unsigned char arena[kTgMemory];
  size_t arena_used = 0;
  std::map<int, size_t> tg_sites;
  std::vector<void*> tgptrs;
  std::string error;
  StackPool stacks;
};

// Per worker thread.
extern thread_local Group* G;
extern thread_local Lane* L;
extern std::atomic<uint64_t> g_switches, g_collectives, g_barriers;
extern std::atomic<uint64_t> g_progress;  // bumped at every park: the watchdog's heartbeat

// Runs every lane of group `pos` to completion, or throws Abort.
void run_group(U3 pos, std::vector<void*>& bufs, std::vector<size_t>& sizes);
std::string where(const Site& s);

}  // namespace mslemu
