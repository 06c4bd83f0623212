// AVX-512 (F/BW/VL/DQ) kernels: 16 lanes, 32 registers. Compiled for that target with a pragma so
// the rest of the build stays baseline x86-64; cpu_backend.cc picks this table only where
// cpu_features() reports AVX-512 with OS support.
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_ps() inside every masked AVX-512 builtin as
// "may be used uninitialized" at -O3 (a known false positive); keep the build log clean.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace tessera::cpu {
namespace {

#include "cpu/vec_avx512.h"

#include "cpu/kernels_generic.inc"

constexpr int kMr = TESSERA_AVX512_MR, kNv = TESSERA_AVX512_NV;  // 12 x 32: 24 accumulators, 2 B vectors
const Kernels kTable{
    .level = Simd::Avx512,
    .mr = kMr,
    .nr = kNv * V512::L,
    .gemm_micro = gemm_micros<V512, kMr, kNv>(),
    .gemm_tail = gemm_tails<V512, kMr, kNv>(),
    .pack_b = pack_b_transposed<V512>,
    .pack_a = pack_a_transposed<V512>,
    .epilogue = epilogue_t<V512>,
    .layer_norm_row = layer_norm_row_t<V512>,
    .rms_norm_row = rms_norm_row_t<V512>,
    .rope_row = rope_row_t<V512>,
    .attention = {.run = attention_task_t<V512>, .scratch = attention_scratch_t<V512>, .query_block = AttnShape<V512>::BQ},
};

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {
const Kernels* avx512_kernels() { return &kTable; }
}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* avx512_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
