// Which SIMD kernel tables this build compiled in. On arm64 the NEON table must exist and be the
// best level, so that each_level in the test_cpu_*.cc tables runs every op with it after scalar: test/native-neon.test.ts
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
  EXPECT(tessera::cpu::avx512_bf16_kernels() == nullptr && tessera::cpu::amx_kernels() == nullptr);
  // TESSERA_SIMD=scalar lowers the level on purpose; unset, NEON is what every backend uses.
  if (!std::getenv("TESSERA_SIMD")) {
    const bool bf16 = tessera::cpu_features().neon_bf16;
    EXPECT((tessera::cpu::supported_simd() == (bf16 ? std::vector<Simd>{Simd::Scalar, Simd::Neon, Simd::NeonBf16}
                                                    : std::vector<Simd>{Simd::Scalar, Simd::Neon})));
    EXPECT(tessera::cpu::best_simd() == (bf16 ? Simd::NeonBf16 : Simd::Neon));
    EXPECT(std::string(tessera::simd_level()) == "neon");
    EXPECT(std::string(tessera::bf16_level()) == (bf16 ? "neon-bf16" : "none"));
  }
}

// test/native-neon.test.ts runs qemu -cpu max (FEAT_BF16) with TESSERA_REQUIRE_BF16=1 and looks for this
// line: the BFMMLA GEMM was detected, so the bf16 tests of test_cpu_bf16.cc ran it. (A real arm64 CPU
// without FEAT_BF16 passes it without the variable.)
TEST("cpu: arm64 build detects FEAT_BF16 and has the neon-bf16 table") {
  const tessera::cpu::Kernels* t = tessera::cpu::neon_bf16_kernels();
  EXPECT(t != nullptr && t->level == Simd::NeonBf16 && t->bf16 != nullptr);
  if (!tessera::cpu_features().neon_bf16 && !std::getenv("TESSERA_REQUIRE_BF16")) return;
  EXPECT_MSG(tessera::cpu_features().neon_bf16, "this CPU reports no FEAT_BF16 (HWCAP2_BF16)");
  EXPECT(tessera::cpu::has_bf16(tessera::cpu::best_simd()) == !std::getenv("TESSERA_SIMD"));
}
#elif defined(__x86_64__)
TEST("cpu: x86-64 build has no neon table") {
  EXPECT(tessera::cpu::neon_kernels() == nullptr && tessera::cpu::neon_bf16_kernels() == nullptr);
  for (Simd s : tessera::cpu::supported_simd()) EXPECT(s != Simd::Neon);
}
#endif
