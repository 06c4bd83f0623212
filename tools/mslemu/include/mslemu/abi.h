// What the generated kernel code (prepass.mjs output + the metal_stdlib shim) and the emulator's runtime
// share: call sites, collectives, the per-lane Invocation that trampolines read builtins and buffers
// from, and the kernel registry. Compiled by clang only (the shim needs _Float16 and ext vectors).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace mslemu {

// Where a barrier or collective was called from, for reports. The constructor form matters: its default
// arguments are evaluated at the outermost call site (the kernel line), a braced default argument is not
// under g++ 12.
struct Site {
  const char* file;
  int line;
  Site(const char* f = __builtin_FILE(), int l = __builtin_LINE()) : file(f), line(l) {}
};
#define MSLEMU_SITE ::mslemu::Site()

enum class Coll : int {
  Sum, Max, Min, Prod, And, Or, Xor, Shuffle, ShuffleXor, ShuffleDown, ShuffleUp, Broadcast, BroadcastFirst,
  Ballot, All, Any, PrefixExclSum, PrefixInclSum, PrefixExclProd, PrefixInclProd, SimdBarrier,
  MatLoad, MatStore, MatMad, MatMul, kCount
};
const char* coll_name(Coll c);

// A collective rendezvous: every lane of the active set deposits a pointer to its input, its output and an
// integer argument; the last arriver's scheduler runs `fn` once. Lanes outside `active` must read `poison`.
struct CollCtx;
typedef void (*CollFn)(CollCtx&);
struct CollCtx {
  Coll op;
  int nlanes;
  uint32_t active;  // lanes taking part (same call site)
  uint32_t launched;  // lanes the simdgroup was launched with
  unsigned char poison;
  void* in[32];
  void* out[32];
  long arg[32];
  CollFn fn;
};
void collective(Coll op, Site s, void* in, void* out, long arg, CollFn fn);
void tg_barrier(Site s);
void* tg_alloc(int site_id, size_t bytes, size_t align);
[[noreturn]] void kernel_fail(const char* msg);

// What one dispatch did, summed over its GPU threads (docs/metal-on-linux.md#counters): bytes moved to and
// from device memory (bound buffers; setBytes arguments excluded) and threadgroup memory, simdgroup 8x8x8
// multiply-accumulates, scalar FMAs, other ALU ops and special functions (tools/mslemu/instrument.mjs),
// threadgroup barriers (one per release of a group) and SIMD-group barriers (one per SIMD-group).
struct Counts {
  uint64_t dev_read = 0, dev_write = 0, tg_read = 0, tg_write = 0;
  uint64_t mma = 0, fma = 0, alu = 0, special = 0;
  uint64_t tg_barriers = 0, simd_barriers = 0;
};
void count_mma();  // the shim's simdgroup_multiply(_accumulate): one 8x8x8

struct U3 {
  uint32_t x, y, z;
};
// Everything one GPU thread can ask for: builtins and bindings. `buffer` checks the binding exists, is large
// enough for a `constant T&` and aligned for the element type; failures name the index.
struct Invocation {
  void* const* bufs;
  const size_t* buf_sizes;
  int nbufs;
  void* const* tgmem_ptrs;
  int ntgmem;
  U3 tpig, tpitg, tgpig, tptg, tgpg, tpg;
  uint32_t tiitg, tiisg, sgitg, nsg, tpsg;
  void* buffer(int i, size_t need, size_t align) const;
  void* tgmem(int i) const;
  U3 thread_position_in_grid() const { return tpig; }
  U3 thread_position_in_threadgroup() const { return tpitg; }
  U3 threadgroup_position_in_grid() const { return tgpig; }
  U3 threads_per_threadgroup() const { return tptg; }
  U3 threadgroups_per_grid() const { return tgpg; }
  U3 threads_per_grid() const { return tpg; }
  uint32_t thread_index_in_threadgroup() const { return tiitg; }
  uint32_t thread_index_in_simdgroup() const { return tiisg; }
  uint32_t simdgroup_index_in_threadgroup() const { return sgitg; }
  uint32_t simdgroups_per_threadgroup() const { return nsg; }
  uint32_t threads_per_simdgroup() const { return 32; }
  uint32_t thread_execution_width() const { return 32; }
};

typedef void (*KernelFn)(const Invocation&);
// kind: 0 buffer, 1 threadgroup memory. bytes: sizeof(T) for `constant T&` parameters, else 0.
struct ParamInfo {
  int kind;
  int index;
  int readonly;
  unsigned bytes;
};
struct KernelEntry {
  const char* name;
  KernelFn fn;
  const char* file;
  int line;
  const ParamInfo* params;
  int nparams;
  unsigned max_threads;  // [[max_total_threads_per_threadgroup(N)]], else 1024
};
struct Registrar {
  Registrar(std::initializer_list<KernelEntry>);
};
const KernelEntry* find_kernel(const char* name);

}  // namespace mslemu
