// The C interface of build/mslemu/libtessera_mslemu.so (the MSL emulator with every metal/*.metal kernel,
// built by clang in tools/mslemu/build.mjs). The addon is built by any C++ compiler and dlopens the
// library at run time (emu_library.cc), so `npm install` never needs clang; plain C types only.
#pragma once
#include <stddef.h>
#include <stdint.h>

extern "C" {

#define TESSERA_MSLEMU_ABI 2

struct MslemuBuffer {
  uint32_t index;
  void* ptr;
  uint64_t bytes;
};
struct MslemuTgMem {
  uint32_t index;
  uint32_t bytes;
};
struct MslemuDispatch {
  const char* kernel;
  const MslemuBuffer* buffers;  // setBytes data is passed as a buffer too
  uint32_t nbuffers;
  const MslemuTgMem* tgmem;
  uint32_t ntgmem;
  uint32_t groups[3], threads[3];
};
// schedule: 0 forward, 1 reverse, 2 shuffled (seeded); poison fills threadgroup memory.
// count_classes: with counts, run one group per grid class and weight it (mslemu::RunOptions::count_classes).
struct MslemuOptions {
  int32_t schedule;
  uint64_t seed;
  uint8_t poison;
  int32_t workers;
  int32_t count_classes;
};
// What one dispatch did (mslemu::Counts, docs/metal-on-linux.md#counters).
struct MslemuCounts {
  uint64_t dev_read, dev_write, tg_read, tg_write;
  uint64_t mma, fma, alu, special;
  uint64_t tg_barriers, simd_barriers;
};
struct MslemuKernel {
  const char* name;
  const char* file;
  int32_t line;
  uint32_t max_threads;
};

typedef uint32_t (*mslemu_abi_fn)(void);
typedef int32_t (*mslemu_run_fn)(const MslemuDispatch*, const MslemuOptions*, MslemuCounts* counts, char* err, size_t err_len);
typedef int32_t (*mslemu_kernel_fn)(const char* name, MslemuKernel* out);

uint32_t mslemu_abi(void);  // TESSERA_MSLEMU_ABI
// 0: ran; 1: the emulator reported a problem (message in err); 2: unknown kernel. counts may be null.
int32_t mslemu_run(const MslemuDispatch* d, const MslemuOptions* o, MslemuCounts* counts, char* err, size_t err_len);
// 1 and fills *out if the library has the kernel, else 0.
int32_t mslemu_kernel(const char* name, MslemuKernel* out);
}
