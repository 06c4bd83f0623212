// The CPU backend: every op of backend/backend.h run eagerly on the host, multithreaded with the
// common ThreadPool, with SIMD kernels chosen at run time (AVX-512 / AVX2+FMA / NEON / scalar).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace tessera::cpu {

// Kernel families, lowest to highest on each architecture. The bf16 levels are their base level's
// f32 kernels plus a bf16 GEMM (Kernels::bf16), which only precision 'bf16' uses.
enum class Simd { Scalar, Neon, NeonBf16, Avx2, Avx512, Avx512Bf16, Amx };

// "scalar", "neon", "neon-bf16", "avx2", "avx512", "avx512-bf16", "amx": TESSERA_SIMD's spelling.
const char* simd_name(Simd level);
// Whether the level has a bf16 GEMM.
bool has_bf16(Simd level);

// What the GEMMs of linear() compute in: f32 (exact as ever), or bf16 operands with f32 sums where
// the level has a bf16 GEMM (weights stored as bf16 only; others stay f32). Everything else is f32.
enum class Precision { F32, Bf16 };
// The best level this machine runs (TESSERA_SIMD=avx2|scalar lowers it, see cpu_features.h).
Simd best_simd();
// Every level this machine can run, lowest first (always includes Scalar): tests run them all.
std::vector<Simd> supported_simd();

// threads <= 0: one per physical core. Precision::Bf16 on a level without bf16 units runs f32, and
// the backend's precision() says so.
std::unique_ptr<backend::Backend> make_cpu_backend(int threads, Precision precision = Precision::F32);
// The same with the kernels forced to `level` (ERR_INVALID_ARGUMENT if this machine cannot run it).
std::unique_ptr<backend::Backend> make_cpu_backend(int threads, Simd level, Precision precision = Precision::F32);
// The AVX2 level with the given bf16 widening (common/cpu_features.h: CpuFeatures::bf16_unpack),
// whatever this CPU's vendor: for running both tables side by side in one process (tests,
// bench/kernels/widening_ab.cc). ERR_INVALID_ARGUMENT without AVX2.
std::unique_ptr<backend::Backend> make_cpu_backend_avx2(int threads, bool bf16_unpack);

// ---- the backend's own scratch (packed weight strips, per-thread GEMM and attention buffers)
// It grows to the largest op run so far and is kept for the backend's lifetime, so a model's
// memory prediction must add it: backend::Backend::workspace_bytes(work) predicts it from the
// formulas the kernels allocate by (what a fresh backend holds at most after running `work`).
// What the workspace of `backend` (a CPU backend) holds now, for the tests of that prediction.
using backend::LinearShape;
using backend::Workload;
uint64_t held_workspace_bytes(const backend::Backend& backend);

}  // namespace tessera::cpu
