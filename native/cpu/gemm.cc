// linear(): y = act(clamp_out(clamp_in(x)·Wᵀ + bias))·mul + residual, as a cache-blocked GEMM.
//
// Blocking (GotoBLAS/BLIS style): the weight is cut into strips (all of K for up to a few MiB of
// output columns), a strip into K blocks, a K block into micro-panels [kc][nr] of nr output
// columns, k-major, in the weight's own dtype (the micro-kernel widens bf16/f16 in registers).
// strip_offset() is that layout; one K block of a strip is contiguous, so the kernels walk it
// front to back. A weight pack_weight() rearranged at load is read where it lies; otherwise (a
// mapping, a stream slot) each strip is packed per call into shared scratch. A packed weight's
// last rows (out % nr: no whole panel) stay row-major and are packed per call. Threads then take
// (row block x column chunk) work items, those of all strips read in place from one counter (one
// parallel region, not one per strip: no wait at each strip's end). An item packs its MC x KC
// block of x (applying the input clamp), runs the register-blocked micro-kernel over every
// nr-panel (a short tile for the ragged last row panel), and, after the last K block, applies the
// fused epilogue (bias, output clamp, activation, multiplier, residual) to each of its rows, over
// all of its columns in one call.
// Partial sums live in a slot-private accumulator, never in y, so y may alias the multiplier and
// the residual (and even x: x is copied first in that case).
// Precision 'bf16' (Context::bf16) runs every GEMM on the level's bf16 kernels (Kernels::bf16)
// through the same blocking: A packed as bf16, weight panels as bf16 (f32 and f16 weights rounded as
// they are packed) in that ISA's layout, K padded per K block to the kernel's granule; the epilogue
// is the same f32 one.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/aligned.h"
#include "common/error.h"
#include "cpu/denormals.h"
#include "cpu/epilogue.h"
#include "cpu/ops.h"

namespace tessera::cpu {

namespace {

// Blocking sizes (compile-time overridable for tuning runs, e.g. -DTESSERA_GEMM_MC=192).
#ifndef TESSERA_GEMM_KC
#define TESSERA_GEMM_KC 256  // K block: a B micro-panel (kc x nr) stays in L1
#endif
#ifndef TESSERA_GEMM_MC
#define TESSERA_GEMM_MC 96  // rows per work item: the packed A block (mc x kc) stays in L2
#endif
#ifndef TESSERA_GEMM_STRIP_ELEMS
#define TESSERA_GEMM_STRIP_ELEMS (2 << 20)  // weight strip budget, in elements (measured faster than 3x it)
#endif
constexpr int64_t kKc = TESSERA_GEMM_KC;
constexpr int64_t kMcTarget = TESSERA_GEMM_MC;
constexpr int64_t kStripElems = TESSERA_GEMM_STRIP_ELEMS;

// How one linear is cut up: weight strips, row blocks, and (for few row blocks) column chunks.
struct Blocking {
  int64_t panels_total, strip_panels, mc, mblocks;
};

Blocking blocking(int64_t M, int64_t K, int64_t N, int mr, int nr) {
  Blocking b;
  b.panels_total = (N + nr - 1) / nr;
  b.strip_panels = std::max<int64_t>(1, std::min<int64_t>(b.panels_total, kStripElems / (std::max<int64_t>(K, 1) * nr)));
  b.mc = std::max<int64_t>(mr, kMcTarget / mr * mr);
  b.mblocks = (M + b.mc - 1) / b.mc;
  return b;
}

// Where micro-panel p (of `panels` in its strip) holds K block k0 (kc deep): elements from the
// strip's start. The one formula for the packed weights and the per-call strips.
size_t strip_offset(int64_t panels, int64_t p, int64_t k0, int64_t kc, int nr) {
  return (size_t(k0) * size_t(panels) + size_t(p) * size_t(kc)) * size_t(nr);
}

struct Split {
  int64_t nchunks, chunk_panels, items;
};

// Work items over a strip of sp panels: row blocks, split further by column chunks when there
// are fewer than two row blocks per thread.
Split split(int64_t mblocks, int64_t sp, int threads) {
  Split s;
  s.nchunks = 1;
  if (mblocks < 2 * threads) s.nchunks = std::min<int64_t>(sp, (2 * threads + mblocks - 1) / mblocks);
  s.chunk_panels = (sp + s.nchunks - 1) / s.nchunks;
  s.nchunks = (sp + s.chunk_panels - 1) / s.chunk_panels;
  s.items = mblocks * s.nchunks;
  return s;
}

// The GEMM one linear runs: the f32 kernels (weights widened in registers) or, in precision 'bf16',
// the bf16 kernels. Its tile, K granule, panel element size and how a packed weight is marked.
struct Path {
  const Bf16Gemm* bf16;  // null: the f32 kernels
  int mr, nr;
  int64_t kstep;
  size_t es;  // bytes of a panel element: the weight's own dtype's, or 2 (bf16)
  // Tensor::panel of a weight packed for this path: nr, plus kBf16Mark for the bf16 layouts
  // (whose nr may equal an f32 table's), so neither reads the other's layout.
  int32_t mark;
  int64_t padded(int64_t kc) const { return (kc + kstep - 1) / kstep * kstep; }
};
constexpr int32_t kBf16Mark = 1 << 20;

Path path_for(const Context& c, DType wt) {
  if (c.bf16 && c.k.bf16) {
    const Bf16Gemm& g = *c.k.bf16;
    return {&g, g.mr, g.nr, g.kstep, 2, g.nr + kBf16Mark};
  }
  return {nullptr, c.k.mr, c.k.nr, 1, dtype_size(wt), c.k.nr};
}

}  // namespace

static LinearScratch path_scratch(const Path& pa, int threads, int64_t M, int64_t K, int64_t N) {
  LinearScratch s;
  const Blocking bl = blocking(M, K, N, pa.mr, pa.nr);
  const Split sl = split(bl.mblocks, bl.strip_panels, threads);  // the first strip is the widest
  s.tasks = int(std::min<int64_t>(threads, sl.items));
  // f32 weights (bf16/f16 need half); the bf16 path's are bf16, K padded
  s.shared_floats = pa.bf16 ? (size_t(pa.padded(K)) * size_t(bl.strip_panels * pa.nr) + 1) / 2
                            : size_t(K) * size_t(bl.strip_panels * pa.nr);
  s.pack_a_floats = size_t(bl.mc) * size_t(kKc);  // f32 A (the bf16 path's A needs half)
  s.accum_floats = size_t(bl.mc) * size_t(sl.chunk_panels * pa.nr);
  return s;
}

LinearScratch linear_scratch(const Context& c, int threads, int64_t M, int64_t K, int64_t N) {
  LinearScratch s;
  if (M <= 0 || N <= 0 || K <= 0) return s;
  return path_scratch(path_for(c, DType::F32), threads, M, K, N);
}

void linear(Context& c, const Tensor& y, const Tensor& x_in, const Tensor& w, const LinearArgs& args) {
  const char* op = "linear";
  require_tensor(y, op, "y");
  require_tensor(x_in, op, "x");
  require_tensor(w, op, "weight");
  require(y.dtype == DType::F32 && x_in.dtype == DType::F32, op, "x and y must be f32");
  const int64_t M = x_in.rows, K = x_in.cols, N = w.rows;
  require(w.cols == K, op,
          "weight is [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] but x has " +
              std::to_string(K) + " columns");
  require(y.rows == M && y.cols == N, op,
          "y is [" + std::to_string(y.rows) + ", " + std::to_string(y.cols) + "], expected [" + std::to_string(M) +
              ", " + std::to_string(N) + "]");
  std::vector<float> bias;
  if (args.bias) vector_f32(*args.bias, N, op, "bias", bias);
  // An element-wise operand of the epilogue ([rows, out] f32, y itself or apart from it): its base and stride.
  auto operand = [&](const Tensor* t, const char* name, const float*& base, int64_t& ld) {
    if (!t) return;
    require_tensor(*t, op, name);
    require(t->dtype == DType::F32 && t->rows == M && t->cols == N, op, std::string(name) + " must be f32 [rows, out]");
    require(!overlaps(*t, y) || (t->buf == y.buf && t->offset == y.offset && t->ld == y.ld), op,
            std::string(name) + " partially overlaps y");
    base = t->host_ptr<float>();
    ld = t->ld;
  };
  const float *res_base = nullptr, *mul_base = nullptr;
  int64_t res_ld = 0, mul_ld = 0;
  operand(args.residual, "residual", res_base, res_ld);
  operand(args.mul, "mul", mul_base, mul_ld);
  const Path pa = path_for(c, w.dtype);
  require(!w.panel || (w.panel == pa.mark && w.contiguous()), op,
          "weight was packed in panels marked " + std::to_string(w.panel) + "; this kernel reads " +
              std::to_string(pa.mark));
  if (M == 0 || N == 0) return;

  const Kernels& kk = c.k;
  const Bf16Gemm* bg = pa.bf16;
  const int mr = pa.mr, nr = pa.nr;
  const int T = c.pool.size();

  // y aliasing x: work from a copy of x (a strip re-reads x after an earlier strip wrote y).
  Tensor x = x_in;
  AlignedBuffer x_copy;
  if (overlaps(x_in, y)) {
    x_copy = AlignedBuffer(size_t(M) * size_t(K) * 4 + 4);
    for (int64_t r = 0; r < M; ++r) std::memcpy(x_copy.as<float>() + r * K, x_in.host_ptr<float>(r), size_t(K) * 4);
  }
  const float* x_base = x_copy.data() ? x_copy.as<float>() : x.host_ptr<float>();
  const int64_t x_ld = x_copy.data() ? K : x.ld;

  Epilogue epi;
  epi.act = args.act;
  epi.clamp_out = std::isfinite(args.out_min) || std::isfinite(args.out_max);
  epi.lo = args.out_min;
  epi.hi = args.out_max;
  const bool clamp_in = std::isfinite(args.in_min) || std::isfinite(args.in_max);
  const float in_lo = args.in_min, in_hi = args.in_max;

  if (K == 0) {  // y = epilogue(bias)
    std::vector<float> zero(size_t(N), 0.0f);
    for (int64_t r = 0; r < M; ++r)
      kk.epilogue(y.host_ptr<float>(r), zero.data(), N, bias.empty() ? nullptr : bias.data(),
                  mul_base ? mul_base + r * mul_ld : nullptr, res_base ? res_base + r * res_ld : nullptr, epi);
    return;
  }

  const Blocking bl = blocking(M, K, N, mr, nr);
  const int64_t panels_total = bl.panels_total, strip_panels = bl.strip_panels, mc = bl.mc, mblocks = bl.mblocks;
  const size_t w_es = pa.es, src_es = dtype_size(w.dtype);  // panel elements; the weight's own
  const char* w_base = static_cast<const char*>(w.buf->host) + w.offset;
  const Kernels::GemmMicro micro = kk.gemm_micro[size_t(w.dtype)];
  // The kernel for a row panel of `rows` real rows: the shortest tile that covers them.
  auto micro_for = [&](int64_t rows) {
    if (rows < mr && !bg)
      for (const Kernels::GemmTail& t : kk.gemm_tail)
        if (t.rows >= rows) return t.micro[size_t(w.dtype)];
    return micro;
  };
  // Panels [0, in_place) of a packed weight are read where they lie (pack_weight laid them out
  // strip by strip, as strip_offset() says).
  const int64_t in_place = w.panel ? N / nr : 0;

  // A strip: sp panels from panel sp0; its first first_packed are read in place, the rest from
  // bpack, packed for this call. Its work items: (row block x column chunk), as split() cuts them.
  struct Strip {
    int64_t sp0, sp, first_packed;
    const char* bpack;
    Split sl;
  };
  // The [kc][nr] block of strip-local panel p at K offset k0: the in-place panels of a packed
  // weight form a strip of first_packed panels at the strip's start (all of its rows).
  auto panel = [&](const Strip& s, int64_t p, int64_t k0, int64_t kc) -> const void* {
    if (p < s.first_packed)
      return w_base + (size_t(s.sp0) * size_t(nr) * size_t(K) + strip_offset(s.first_packed, p, k0, kc, nr)) * w_es;
    return s.bpack + strip_offset(s.sp - s.first_packed, p - s.first_packed, k0, kc, nr) * w_es;
  };
  // One work item: rows [m0, m0 + mrows) against column chunk ch of strip s, over all of K.
  // The micro-kernel over one row panel: A panel ip of apack (kcp deep), weight panel bp.
  auto run_micro = [&](Kernels::GemmMicro f32_micro, int64_t kcp, const float* apack, int64_t ip, const void* bp,
                       float* c_tile, int64_t ldc, bool accumulate, const char* pf, int64_t pf_lines) {
    if (bg)
      bg->micro(kcp, reinterpret_cast<const uint16_t*>(apack) + ip * mr * kcp, static_cast<const uint16_t*>(bp), c_tile,
                ldc, accumulate, pf, pf_lines);
    else
      f32_micro(kcp, apack + ip * mr * kcp, bp, c_tile, ldc, accumulate, pf, pf_lines);
  };
  auto run_item = [&](const Strip& s, int64_t mb, int64_t ch, float* apack, float* acc) {
    const int64_t chunk_panels = s.sl.chunk_panels, ldc = chunk_panels * nr;
    const int64_t m0 = mb * mc, mrows = std::min(mc, M - m0);
    const int64_t mpanels = (mrows + mr - 1) / mr;
    const Kernels::GemmMicro last_micro = micro_for(mrows - (mpanels - 1) * mr);
    const int64_t p0 = ch * chunk_panels, p1 = std::min(s.sp, p0 + chunk_panels);
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int64_t kc = std::min(kKc, K - k0), kcp = pa.padded(kc);
      // Pack A: micro-panel ip holds rows [ip*mr, ip*mr+mr) as [kc][mr] (bf16: the kernel's layout), zero past M.
      for (int64_t ip = 0; ip < mpanels; ++ip) {
        const float* xr = x_base + (m0 + ip * mr) * x_ld + k0;
        const int64_t rows = std::min<int64_t>(mr, mrows - ip * mr);
        if (bg) bg->pack_a(reinterpret_cast<uint16_t*>(apack) + ip * mr * kcp, xr, x_ld, rows, kc, clamp_in, in_lo, in_hi);
        else kk.pack_a(apack + ip * mr * kc, xr, x_ld, rows, kc, mr, clamp_in, in_lo, in_hi);
      }
      for (int64_t p = p0; p < p1; ++p) {
        const void* bp = panel(s, p, k0, kcp);
        const int64_t col = (p - p0) * nr;
        // The panel used after this one (the next K block's first after the chunk's last) is
        // fetched into L2 while this one is used, a slice per row panel's call: a weight comes
        // from memory, and its panel's first call would otherwise wait on it (docs/cpu.md).
        const int64_t nk0 = p + 1 < p1 ? k0 : k0 + kc, nkc = pa.padded(std::min(kKc, K - nk0));
        const char* next = nk0 < K ? static_cast<const char*>(panel(s, p + 1 < p1 ? p + 1 : p0, nk0, nkc)) : nullptr;
        constexpr int64_t line = Kernels::kPrefetchLine;
        const int64_t next_lines = next ? (nkc * nr * int64_t(w_es) + line - 1) / line : 0;
        for (int64_t ip = 0; ip < mpanels; ++ip) {
          const int64_t l0 = ip * next_lines / mpanels, l1 = (ip + 1) * next_lines / mpanels;
          run_micro(ip + 1 < mpanels ? micro : last_micro, kcp, apack, ip, bp, acc + ip * mr * ldc + col, ldc, k0 > 0,
                    next ? next + l0 * line : nullptr, l1 - l0);
        }
      }
    }
    // The item's rows, each over all of its columns in one call (a call costs more than 2 vectors' work).
    const int64_t n0 = (s.sp0 + p0) * nr, n = std::min<int64_t>((p1 - p0) * nr, N - n0);
    for (int64_t r = 0; r < mrows; ++r) {
      const int64_t gr = m0 + r;
      kk.epilogue(y.host_ptr<float>(gr, n0), acc + r * ldc, n, bias.empty() ? nullptr : bias.data() + n0,
                  mul_base ? mul_base + gr * mul_ld + n0 : nullptr, res_base ? res_base + gr * res_ld + n0 : nullptr,
                  epi);
    }
  };
  // The items of a run of strips in one parallel region, handed out in order: strips read in
  // place share a region, so a thread done with one strip's items goes on to the next strip's
  // instead of waiting for the others at the strip's end.
  std::vector<Strip> strips;
  auto run_strips = [&] {
    int64_t items = 0, widest = 0;  // items; the widest column chunk, in panels
    for (const Strip& s : strips) items += s.sl.items, widest = std::max(widest, s.sl.chunk_panels);
    std::atomic<int64_t> next{0};
    c.pool.run_tasks(size_t(std::min<int64_t>(T, items)), [&](size_t slot) {
      DenormalGuard ftz;
      float* apack = c.ws.slot(int(slot), Scratch::PackA, size_t(mc) * size_t(kKc));
      float* acc = c.ws.slot(int(slot), Scratch::Accum, size_t(mc) * size_t(widest * nr));
      size_t si = 0;
      for (int64_t it, first = 0; (it = next.fetch_add(1)) < items;) {
        for (; it - first >= strips[si].sl.items; ++si) first += strips[si].sl.items;  // items only increase
        const Strip& s = strips[si];
        run_item(s, (it - first) / s.sl.nchunks, (it - first) % s.sl.nchunks, apack, acc);
      }
    });
    strips.clear();
  };

  const int64_t kblocks = (K + kKc - 1) / kKc;
  for (int64_t sp0 = 0; sp0 < panels_total; sp0 += strip_panels) {
    const int64_t sp = std::min(strip_panels, panels_total - sp0);  // panels in this strip
    const int64_t first_packed = std::clamp<int64_t>(in_place - sp0, 0, sp);  // strip-local
    const int64_t np = sp - first_packed;
    if (np == 0) {  // read in place: joins the run
      strips.push_back({sp0, sp, first_packed, nullptr, split(mblocks, sp, T)});
      continue;
    }
    // Packed per call, into the one shared strip: the run so far goes first, this strip alone.
    // One pack item per (K block, panel).
    if (!strips.empty()) run_strips();
    char* bpack = reinterpret_cast<char*>(c.ws.shared((size_t(pa.padded(K)) * size_t(np * nr) * w_es + 3) / 4));
    c.pool.parallel_for(size_t(kblocks * np), [&](size_t b, size_t e) {
      for (size_t it = b; it < e; ++it) {
        int64_t kb = int64_t(it) / np, p = int64_t(it) % np;
        int64_t k0 = kb * kKc, kc = std::min(kKc, K - k0);
        int64_t n0 = (sp0 + first_packed + p) * nr, n = std::min<int64_t>(nr, N - n0);
        char* dst = bpack + strip_offset(np, p, k0, pa.padded(kc), nr) * w_es;
        const char* src = w_base + (size_t(n0) * size_t(w.ld) + size_t(k0)) * src_es;
        if (bg) bg->pack_b(reinterpret_cast<uint16_t*>(dst), src, w.dtype, w.ld, n, kc);
        else kk.pack_b(dst, src, w.dtype, w.ld, n, kc, nr);
      }
    }, 4);
    strips.push_back({sp0, sp, first_packed, bpack, split(mblocks, sp, T)});
    run_strips();
  }
  if (!strips.empty()) run_strips();
}

bool pack_weight(Context& c, Tensor& w) {
  const Path pa = path_for(c, w.dtype);
  const int nr = pa.nr;
  if (w.panel || !w.buf || !w.buf->host || w.rows < nr || w.cols < 1 || !w.contiguous()) return false;
  // In place needs the same bytes: a bf16 layout whose K would be padded is packed per call instead.
  if (w.cols % pa.kstep) return false;
  require_tensor(w, "pack_weight", "weight");
  const int64_t K = w.cols, N = w.rows, in_place = N / nr;
  const int64_t strip_panels = blocking(1, K, N, pa.mr, nr).strip_panels;
  // es: the packed panels' element size (bf16 for the bf16 kernels: an f32 weight's panels then
  // take the first half of its bytes); src_es: the weight's own.
  const size_t es = pa.es, src_es = dtype_size(w.dtype), bytes = size_t(in_place) * size_t(nr) * size_t(K) * src_es;
  // The whole panels' rows are exactly the bytes their strips take: rearranged in place, from a
  // copy (made here: the pool's tasks must not throw). Items: (strip, K block, panel).
  char* base = w.host_ptr<char>();
  AlignedBuffer copy(bytes);
  std::memcpy(copy.data(), base, bytes);
  struct Item {
    int64_t sp0, np, p, k0;
  };
  std::vector<Item> items;
  for (int64_t sp0 = 0; sp0 < in_place; sp0 += strip_panels) {
    const int64_t np = std::min(strip_panels, in_place - sp0);
    for (int64_t k0 = 0; k0 < K; k0 += kKc)
      for (int64_t p = 0; p < np; ++p) items.push_back({sp0, np, p, k0});
  }
  c.pool.parallel_for(items.size(), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const Item& it = items[i];
      const int64_t kc = std::min(kKc, K - it.k0);
      char* dst = base + (size_t(it.sp0) * size_t(nr) * size_t(K) + strip_offset(it.np, it.p, it.k0, kc, nr)) * es;
      const char* src = copy.as<char>() + (size_t(it.sp0 + it.p) * size_t(nr) * size_t(K) + size_t(it.k0)) * src_es;
      if (pa.bf16) pa.bf16->pack_b(reinterpret_cast<uint16_t*>(dst), src, w.dtype, K, nr, kc);
      else c.k.pack_b(dst, src, w.dtype, K, nr, kc, nr);
    }
  }, 16);
  w.panel = pa.mark;
  return true;
}

}  // namespace tessera::cpu
