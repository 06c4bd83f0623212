// Run-time CPU feature detection: kernels are compiled for several ISAs (function target
// attributes) and chosen here at run time, so one build runs on any x86-64 or arm64 machine.
#pragma once

namespace tessera {

struct CpuFeatures {
  bool avx2_fma = false;   // AVX2 + FMA + F16C (x86-64)
  bool avx512 = false;     // AVX-512 F/BW/VL/DQ with OS support for ZMM state
  bool neon = false;       // arm64 (always)
  // How the AVX2 kernels widen a pair of bf16 weight vectors (kernels_avx2.cc): by two unpacks
  // with zero on Intel cores, whose vector shifts share ports 0 and 1 with the FMAs while the
  // unpacks run on port 5; by a shift and a mask elsewhere (level with the unpacks on AMD's Zen 5;
  // docs/cpu.md says why it stays for Zen 1-3). TESSERA_BF16_WIDEN=unpack|shift overrides it.
  bool bf16_unpack = false;
};

const CpuFeatures& cpu_features();
// "avx512", "avx2", "neon" or "scalar": the best path this machine runs; TESSERA_SIMD lowers it.
const char* simd_level();
// "unpack" or "shift": CpuFeatures::bf16_unpack, as TESSERA_BF16_WIDEN spells it.
const char* bf16_widening();

}  // namespace tessera
