// The counters' runtime side (docs/metal-on-linux.md#counters): which addresses are device or threadgroup
// memory for the dispatch running on this worker thread, and the per-thread totals that the instrumented
// kernel code (tools/mslemu/instrument.mjs) adds to. Thread-local: each worker counts its own groups.
#include "counts.h"

extern "C" {
// [0] scalar FMAs, [1] other ALU ops, [2] special functions: added to by every instrumented basic block.
__attribute__((visibility("default"), tls_model("initial-exec"))) __thread uint64_t mslemu_ops[3];
}

namespace mslemu {

__attribute__((tls_model("initial-exec"))) __thread CountRanges t_ranges;
__attribute__((tls_model("initial-exec"))) __thread Counts* t_counts;

void count_mma() {
  if (t_counts) t_counts->mma++;
}

Counts take_counts() {
  Counts c = t_counts ? *t_counts : Counts{};
  c.fma = mslemu_ops[0];
  c.alu = mslemu_ops[1];
  c.special = mslemu_ops[2];
  if (t_counts) *t_counts = Counts{};
  mslemu_ops[0] = mslemu_ops[1] = mslemu_ops[2] = 0;
  return c;
}

void add_counts(Counts& to, const Counts& c, uint64_t times) {
  to.dev_read += c.dev_read * times;
  to.dev_write += c.dev_write * times;
  to.tg_read += c.tg_read * times;
  to.tg_write += c.tg_write * times;
  to.mma += c.mma * times;
  to.fma += c.fma * times;
  to.alu += c.alu * times;
  to.special += c.special * times;
  to.tg_barriers += c.tg_barriers * times;
  to.simd_barriers += c.simd_barriers * times;
}

}  // namespace mslemu

namespace {
inline void count_access(const void* p, uint64_t n, bool write) {
  using namespace mslemu;
  Counts* c = t_counts;
  if (!c) return;
  const char* a = static_cast<const char*>(p);
  const CountRanges& r = t_ranges;
  if (a >= r.tg_lo && a < r.tg_hi) {
    (write ? c->tg_write : c->tg_read) += n;
    return;
  }
  for (int i = 0; i < r.n; i++)
    if (a >= r.lo[i] && a < r.hi[i]) {
      (write ? c->dev_write : c->dev_read) += n;
      return;
    }
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) void mslemu_count_ld(const void* p, uint64_t n) { count_access(p, n, false); }
__attribute__((visibility("default"))) void mslemu_count_st(const void* p, uint64_t n) { count_access(p, n, true); }
}
