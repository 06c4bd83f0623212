// The per-ISA kernel table: one instance per Simd level, chosen when the backend is made. The
// drivers (gemm.cc, attention.cc, norms.cc, elementwise.cc) do validation, blocking, packing and
// threading once; only these inner loops differ between AVX-512, AVX2+FMA, NEON and scalar.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "cpu/cpu_backend.h"
#include "cpu/epilogue.h"

namespace tessera::cpu {

// One attention work item: a segment's rows, one head (pointers at its first row and column).
struct AttnJob {
  const float *q, *k, *v;
  float* out;
  int64_t ldq, ldk, ldv, ldo;
  int64_t nq, nk, hd;  // query rows, key rows, head_dim (q and k rows are the same segment)
  float scale;
};

// The bf16 GEMM of a level with bf16 units (precision 'bf16'): activations rounded to bf16 (round to
// nearest even, as torch's .to(bfloat16)) times the weights as bf16 (f32 and f16 weights rounded
// alike when their panels are packed), summed in f32 by the ISA's dot-product instruction. A is packed per row panel and B per weight panel in the layout that instruction wants;
// K is zero-padded to a multiple of kstep in both (a zero product adds nothing). How the instruction
// rounds its sums (`sum`) is what the scalar reference of the tests follows, so the kernels are held
// to it bit for bit (AMX: to a bound, see below).
struct Bf16Gemm {
  enum class Sum {
    PairOddFirst,    // AVX512-BF16 vdpbf16ps: acc += a1·b1, then acc += a0·b0, each rounded to nearest even
    PairEvenFirst,   // AMX TDPBF16PS as the SDM's pseudocode has it: acc += a0·b0, then acc += a1·b1, each
                     // rounded to nearest even. Sapphire Rapids does not round so (tens of ulp apart): a bound
    PairRoundToOdd,  // Arm BFMMLA/BFDOT: acc += (a0·b0 + a1·b1), both adds rounded to odd, denormals flushed
  };
  Sum sum;
  int mr, nr, kstep;  // rows of an A panel, columns of a weight panel, K's padding granule
  // C[0..mr)[0..nr) (row stride ldc) = (accumulate ? C : 0) + A·B over kc (a multiple of kstep);
  // C rows past the real ones are written too (the driver's accumulator has room for them).
  using Micro = void (*)(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, bool accumulate,
                         const void* prefetch, int64_t prefetch_lines);
  Micro micro;
  // A panel of x's rows [0, rows) (zero rows up to mr), k < kc (zero up to kc rounded up to kstep),
  // clamped, rounded to bf16.
  void (*pack_a)(uint16_t* dst, const float* x, int64_t ldx, int64_t rows, int64_t kc, bool clamp, float lo, float hi);
  // A weight panel of W's columns [0, n) (zero up to nr), k < kc (zero up to kc rounded up to kstep),
  // W in dtype dt (rounded to bf16 by bf16_at).
  void (*pack_b)(uint16_t* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc);
};

// A flash-attention kernel: one job at a time, in slot scratch of scratch(nk, hd) floats, taking
// query_block query rows per block (Backend::attention_query_block).
struct AttnKernel {
  void (*run)(const AttnJob& job, float* scratch);
  size_t (*scratch)(int64_t nk, int64_t hd);
  int query_block;
};

struct Kernels {
  Simd level;
  // GEMM micro-kernel: C[0..mr)[0..nr) (row stride ldc) = (accumulate ? C : 0) + A·B, where A is
  // packed k-major [kc][mr] f32 and B is a weight panel k-major [kc][nr] in the weight's own
  // dtype, widened in registers (free next to the FMAs, and half the bytes for bf16/f16).
  // Indexed by DType (F32, F16, BF16). While it runs, it fetches `prefetch_lines` lines of
  // kPrefetchLine bytes from `prefetch` into L2, spread over its k loop: the driver passes a slice
  // of the weight panel it uses next, which otherwise comes from memory while the FMAs wait.
  static constexpr int64_t kPrefetchLine = 64;  // bytes: x86-64's line (Apple's 128-byte line is fetched twice)
  int mr, nr;
  using GemmMicro = void (*)(int64_t kc, const float* a, const void* b, float* c, int64_t ldc, bool accumulate,
                            const void* prefetch, int64_t prefetch_lines);
  std::array<GemmMicro, 3> gemm_micro;
  // The same over only the first `rows` rows of a panel (A still [kc][mr]; C rows past `rows`
  // untouched), ascending; entries with rows 0 are absent. The driver runs the ragged last row
  // panel with the shortest that covers it.
  struct GemmTail {
    int rows = 0;
    std::array<GemmMicro, 3> micro{};
  };
  std::array<GemmTail, 2> gemm_tail;
  // Packs a weight panel: dst[k*nr + j] = W[j][k] for columns j < n (n <= nr; the rest zero),
  // k < kc, in W's dtype dt (a bit-exact move, never a conversion); W rows start at w with a
  // stride of ldw elements.
  void (*pack_b)(void* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc, int nr);
  // Packs A: dst[k*mr + i] = clamp(x[i][k]) for i < rows (<= mr; zero rows after), k < kc.
  void (*pack_a)(float* dst, const float* x, int64_t ldx, int64_t rows, int64_t kc, int mr, bool clamp, float lo,
                 float hi);
  // y[j] = act(clamp(acc[j] + bias[j])) * mul[j] + res[j], j < n (bias, mul, res may be null, mul and
  // res may be y).
  void (*epilogue)(float* y, const float* acc, int64_t n, const float* bias, const float* mul, const float* res,
                   const Epilogue& e);
  void (*layer_norm_row)(float* y, const float* x, int64_t n, const float* g, const float* b, float eps);
  // y = res + x / rms · w per group of one row (w, res may be null; res may be y, and so may x).
  void (*rms_norm_row)(float* y, const float* x, int64_t n, int64_t group, const float* w, const float* res, float eps);
  // Rotary embedding in place on one row; with `norm`, each head RMS-normed first (weight nw, may be null:
  // weightless), as rms_norm_row over head_dim groups would, bit for bit.
  void (*rope_row)(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim, int64_t sections,
                   bool norm, const float* nw, float eps);
  // Flash attention in f32 (q, k, v and every sum).
  AttnKernel attention;
  // The bf16 GEMM (levels with bf16 units only; a bf16 level is its base level's table plus this).
  const Bf16Gemm* bf16 = nullptr;
  // The bf16 attention (precision 'bf16', on the levels where it pays: AMX): Q·Kᵀ and P·V with
  // q, k, v and P rounded to bf16 (nearest even) and f32 sums; the online softmax stays f32.
  // Null elsewhere: a bf16 level without it runs the f32 attention.
  const AttnKernel* bf16_attention = nullptr;
};

const Kernels& kernels_for(Simd level);

// Per-ISA tables (kernels_<isa>.cc); null where the ISA is not compiled in.
const Kernels* scalar_kernels();
const Kernels* avx2_kernels();  // the table of CpuFeatures::bf16_unpack
const Kernels* avx2_kernels(bool bf16_unpack);  // either AVX2 table (tests compare them)
const Kernels* avx512_kernels();
const Kernels* neon_kernels();
const Kernels* avx512_bf16_kernels();  // avx512_kernels() + vdpbf16ps (gemm_bf16_x86.cc)
const Kernels* amx_kernels();          // avx512_kernels() + AMX tiles (gemm_bf16_x86.cc)
const Kernels* neon_bf16_kernels();    // neon_kernels() + BFMMLA (gemm_bf16_neon.cc)
const AttnKernel* amx_attention();     // amx_kernels()' bf16 attention (attention_amx.cc); null off x86-64

}  // namespace tessera::cpu
