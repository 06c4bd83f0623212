// EmuExecutor: runs dispatches on the MSL emulator (build/mslemu/libtessera_mslemu.so, dlopened at run
// time so the addon itself never needs clang). Scratch is filled with the poison byte, outputs the op layer
// marks write-only are re-poisoned before each dispatch, so a kernel that reads what it never wrote, or
// forgets to write something, gives different results under the two poisons.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metal/dispatch.h"

namespace tessera::mtl {

struct EmuOptions {
  int schedule = 0;  // 0 forward, 1 reverse, 2 shuffled (seeded)
  uint64_t seed = 1;
  uint8_t poison = 0xFF;
  int workers = 2;  // threads for a dispatch's threadgroups (forward schedule only)
  uint32_t max_threads = 0;  // >0: pipelines allow at most this many threads (a GPU under register
                             // pressure), to exercise the op layer's fallback; TESSERA_MSLEMU_MAX_THREADS
  bool count = false;          // keep each dispatch's counts (emu_counts); TESSERA_MSLEMU_COUNTS=<file> also
                              // appends them there as JSON lines
  bool count_classes = false;  // count one group per grid class (mslemu RunOptions::count_classes): outputs
                               // are not computed; TESSERA_MSLEMU_COUNT_CLASSES=1
  std::string counts_file;
  // TESSERA_MSLEMU_SYNCS=<file>: appends a line per batch ("commit" and its kernels) and per host wait for
  // the device ("wait"), so a test can count the round trips an encode makes.
  std::string syncs_file;
  // TESSERA_MSLEMU_SCHEDULE=forward|reverse|shuffled:SEED, TESSERA_MSLEMU_POISON=ff|55, MSLEMU_WORKERS=N
  static EmuOptions from_env();
};

// One dispatch's counts (docs/metal-on-linux.md#counters).
struct DispatchCounts {
  std::string kernel;
  Dim3 groups, threads;
  uint64_t dev_read = 0, dev_write = 0, tg_read = 0, tg_write = 0;
  uint64_t mma = 0, fma = 0, alu = 0, special = 0, tg_barriers = 0, simd_barriers = 0;
};
// The counts of every dispatch run since the last call (EmuOptions::count), and forgets them.
std::vector<DispatchCounts> take_emu_counts(Executor& ex);

// ERR_BACKEND_UNAVAILABLE (saying why and how to build it) when the emulator library is missing.
std::unique_ptr<Executor> make_emu_executor(const EmuOptions& o);
// Where the library is looked for; "" with *why set when it cannot be loaded.
bool emulator_available(std::string* why);
// Changes the schedule/poison of an executor made by make_emu_executor (tests: the four-run check).
void set_emu_options(Executor& ex, const EmuOptions& o);

}  // namespace tessera::mtl
