// Run-time CPU feature detection: kernels are compiled for several ISAs (function target
// attributes) and chosen here at run time, so one build runs on any x86-64 or arm64 machine.
#pragma once

namespace tessera {

struct CpuFeatures {
  bool avx2_fma = false;   // AVX2 + FMA + F16C (x86-64)
  bool avx512 = false;     // AVX-512 F/BW/VL/DQ with OS support for ZMM state
  bool neon = false;       // arm64 (always)
};

const CpuFeatures& cpu_features();
// "avx512", "avx2", "neon" or "scalar": the best path this machine runs; TESSERA_SIMD lowers it.
const char* simd_level();

}  // namespace tessera
