// The CPU backend: every op of backend/backend.h run eagerly on the host, multithreaded with the
// common ThreadPool, with SIMD kernels chosen at run time (AVX-512 / AVX2+FMA / NEON / scalar).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace tessera::cpu {

// Kernel families, lowest to highest on each architecture.
enum class Simd { Scalar, Neon, Avx2, Avx512 };

const char* simd_name(Simd level);
// The best level this machine runs (TESSERA_SIMD=avx2|scalar lowers it, see cpu_features.h).
Simd best_simd();
// Every level this machine can run, lowest first (always includes Scalar): tests run them all.
std::vector<Simd> supported_simd();

// threads <= 0: one per physical core.
std::unique_ptr<gpu::Backend> make_cpu_backend(int threads);
// The same with the kernels forced to `level` (ERR_INVALID_ARGUMENT if this machine cannot run it).
std::unique_ptr<gpu::Backend> make_cpu_backend(int threads, Simd level);
// The AVX2 level with the given bf16 widening (common/cpu_features.h: CpuFeatures::bf16_unpack),
// whatever this CPU's vendor: for running both tables side by side in one process (tests,
// scripts/bench/kernels/widening_ab.cc). ERR_INVALID_ARGUMENT without AVX2.
std::unique_ptr<gpu::Backend> make_cpu_backend_avx2(int threads, bool bf16_unpack);

// ---- the backend's own scratch (packed weight strips, per-thread GEMM and attention buffers)
// It grows to the largest op run so far and is kept for the backend's lifetime, so a model's
// memory prediction must add it: gpu::Backend::workspace_bytes(work) predicts it from the
// formulas the kernels allocate by (what a fresh backend holds at most after running `work`).
// What the workspace of `backend` (a CPU backend) holds now, for the tests of that prediction.
using gpu::LinearShape;
using gpu::Workload;
uint64_t held_workspace_bytes(const gpu::Backend& backend);

}  // namespace tessera::cpu
