// The CPU backend: every op of gpu/backend.h run eagerly on the host, multithreaded with the
// common ThreadPool, with SIMD kernels chosen at run time (AVX-512 / AVX2+FMA / NEON / scalar).
#pragma once
#include <memory>
#include <vector>

#include "gpu/backend.h"

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

}  // namespace tessera::cpu
