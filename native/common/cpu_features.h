// Run-time CPU feature detection: kernels are compiled for several ISAs (function target
// attributes) and chosen here at run time, so one build runs on any x86-64 or arm64 machine.
#pragma once

namespace tessera {

struct CpuFeatures {
  bool avx2_fma = false;   // AVX2 + FMA + F16C (x86-64)
  bool avx512 = false;     // AVX-512 F/BW/VL/DQ with OS support for ZMM state
  bool neon = false;       // arm64 (always)
  // bf16 units (precision 'bf16'; docs/bf16.md). Each implies the f32 level it extends.
  bool avx512_bf16 = false;  // AVX512-BF16: vdpbf16ps, vcvtne2ps2bf16
  bool amx_bf16 = false;     // AMX-TILE + AMX-BF16, with the tile state granted by the OS (platform::request_amx_tile_data)
  bool neon_bf16 = false;    // arm64 FEAT_BF16: BFMMLA, BFDOT (platform::arm_bf16)
  // How the AVX2 kernels widen a pair of bf16 weight vectors (kernels_avx2.cc): by two unpacks
  // with zero on Intel cores, whose vector shifts share ports 0 and 1 with the FMAs while the
  // unpacks run on port 5; by a shift and a mask elsewhere (level with the unpacks on AMD's Zen 5;
  // docs/cpu.md says why it stays for Zen 1-3). TESSERA_BF16_WIDEN=unpack|shift overrides it.
  bool bf16_unpack = false;
};

const CpuFeatures& cpu_features();
// "avx512", "avx2", "neon" or "scalar": the best f32 path this machine runs; TESSERA_SIMD lowers it.
const char* simd_level();
// "amx", "avx512-bf16", "neon-bf16" or "none": the bf16 GEMM precision 'bf16' runs on this machine.
// TESSERA_SIMD holds any level of the ladder, bf16 ones included:
//   x86    scalar < avx2 < avx512 < avx512-bf16 < amx
//   arm64  scalar < neon < neon-bf16
// (a level this CPU lacks leaves it at its best).
const char* bf16_level();
// "unpack" or "shift": CpuFeatures::bf16_unpack, as TESSERA_BF16_WIDEN spells it.
const char* bf16_widening();

}  // namespace tessera
