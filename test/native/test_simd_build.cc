// Which SIMD kernel tables this build compiled in. On arm64 the NEON table must exist and be the
// best level, so that each_level in test_cpu.cc runs every op with it after scalar: test/native-neon.test.ts
// looks for this test's "ok" line in the runner's output under qemu, as proof that the NEON kernels
// ran there. On x86-64, kernels_neon.cc must compile to nothing (no table, no symbol clash).
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "harness.h"

using tessera::cpu::Simd;

#if defined(__aarch64__)
TEST("cpu: arm64 build runs the neon kernels (best level neon, after scalar)") {
  const tessera::cpu::Kernels* neon = tessera::cpu::neon_kernels();
  EXPECT(neon != nullptr);
  EXPECT(neon->level == Simd::Neon);
  EXPECT(&tessera::cpu::kernels_for(Simd::Neon) == neon);
  EXPECT(tessera::cpu::avx2_kernels() == nullptr && tessera::cpu::avx512_kernels() == nullptr);
  // TESSERA_SIMD=scalar lowers the level on purpose; unset, NEON is what every backend uses.
  if (!std::getenv("TESSERA_SIMD")) {
    EXPECT((tessera::cpu::supported_simd() == std::vector<Simd>{Simd::Scalar, Simd::Neon}));
    EXPECT(tessera::cpu::best_simd() == Simd::Neon);
    EXPECT(std::string(tessera::simd_level()) == "neon");
  }
}
#elif defined(__x86_64__)
TEST("cpu: x86-64 build has no neon table") {
  EXPECT(tessera::cpu::neon_kernels() == nullptr);
  for (Simd s : tessera::cpu::supported_simd()) EXPECT(s != Simd::Neon);
}
#endif
