// The machine's f32 FMA peak: what no GEMM can beat, so that the side-by-side bench can say how
// close each engine comes to the hardware (OpenBLAS's sgemm is the practical roofline; this is
// the theoretical one, measured). Each of T threads runs independent chains of vector FMAs on
// registers (no memory traffic) for a fixed time, on the ISA named by the third argument (avx512,
// avx2, neon) or else the widest vector unit the CPU has (AVX-512, else AVX2+FMA on x86-64; NEON
// on arm64): an engine held to AVX2 on an AVX-512 host is measured against the AVX2 peak.
//   c++ -O2 -std=c++17 -pthread fma-peak.cc -o fma-peak && ./fma-peak 2     -> {"threads":2,"isa":"avx512","gflops":...}
//   ./fma-peak 2 1 avx2                                                     -> the AVX2 peak (seconds = 1)
// An ISA the CPU lacks prints "gflops":null.
// The bf16 peaks (precision 'bf16', docs/bf16.md) are asked for by name: avx512-bf16 (chains of
// vdpbf16ps, 64 flops each), amx (TDPBF16PS on four accumulator tiles, 16,384 flops each; Linux
// grants the tile state first) and neon-bf16 (chains of BFMMLA, 32 flops each).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace {

constexpr int kChains = 24;  // enough independent accumulators to cover FMA latency x throughput
constexpr long kIters = 1 << 20;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) double run_avx512(long reps) {
  __m512 acc[kChains], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kIters / 64; ++k)
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += _mm512_reduce_add_ps(acc[i]);
  return double(s);
}
__attribute__((target("avx2,fma"))) double run_avx2(long reps) {
  __m256 acc[kChains / 2], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < kChains / 2; ++i) acc[i] = _mm256_set1_ps(float(i));
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kIters / 64; ++k)
#pragma GCC unroll 12
      for (int i = 0; i < kChains / 2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  alignas(32) float t[8];
  float s = 0;
  for (int i = 0; i < kChains / 2; ++i) {
    _mm256_store_ps(t, acc[i]);
    for (float v : t) s += v;
  }
  return double(s);
}
__attribute__((target("avx512f,avx512bf16"))) double run_avx512_bf16(long reps) {
  __m512 acc[kChains];
  const __m512bh m = (__m512bh)_mm512_set1_epi32(0x3f803f80), a = (__m512bh)_mm512_set1_epi32(0x33d633d6);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kIters / 64; ++k)
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], m, a);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += _mm512_reduce_add_ps(acc[i]);
  return double(s);
}
constexpr long kAmxOps = kIters / 256;  // TDPBF16PS a rep (4 tiles each)
__attribute__((target("amx-tile,amx-bf16"))) double run_amx(long reps) {
  struct alignas(64) {
    uint8_t palette = 1, start = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  alignas(64) static thread_local uint16_t ab[16 * 32];
  for (auto& v : ab) v = 0x3f80;
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kAmxOps / 4; ++k) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  alignas(64) static thread_local float c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  return double(c[0]);
}
bool amx_permitted() { return syscall(SYS_arch_prctl, 0x1023, 18) == 0; }  // ARCH_REQ_XCOMP_PERM, XTILEDATA
#elif defined(__aarch64__)
__attribute__((target("arch=armv8.2-a+bf16+fp16"))) double run_neon_bf16(long reps) {
  float32x4_t acc[kChains];
  const bfloat16x8_t m = vreinterpretq_bf16_u16(vdupq_n_u16(0x3f80)), a = vreinterpretq_bf16_u16(vdupq_n_u16(0x33d6));
  for (int i = 0; i < kChains; ++i) acc[i] = vdupq_n_f32(float(i));
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kIters / 64; ++k)
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) acc[i] = vbfmmlaq_f32(acc[i], m, a);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += vaddvq_f32(acc[i]);
  return double(s);
}
double run_neon(long reps) {
  float32x4_t acc[kChains], m = vdupq_n_f32(0.999999f), a = vdupq_n_f32(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = vdupq_n_f32(float(i));
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kIters / 64; ++k)
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) acc[i] = vfmaq_f32(a, acc[i], m);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += vaddvq_f32(acc[i]);
  return double(s);
}
#endif

struct Isa {
  const char* name;
  double (*run)(long);
  double flops_per_rep;  // 2 flops per lane per FMA
};

// The ISAs this CPU runs, widest first.
std::vector<Isa> supported() {
  std::vector<Isa> v;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) v.push_back({"avx512", run_avx512, 2.0 * 16 * kChains * (kIters / 64)});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    v.push_back({"avx2", run_avx2, 2.0 * 8 * (kChains / 2) * (kIters / 64)});
  if (__builtin_cpu_supports("avx512bf16"))
    v.push_back({"avx512-bf16", run_avx512_bf16, 2.0 * 32 * kChains * (kIters / 64)});
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24)) && amx_permitted())
    v.push_back({"amx", run_amx, 2.0 * 16 * 16 * 32 * double(kAmxOps / 4 * 4)});
#elif defined(__aarch64__)
  v.push_back({"neon", run_neon, 2.0 * 4 * kChains * (kIters / 64)});
  v.push_back({"neon-bf16", run_neon_bf16, 2.0 * 2 * 2 * 4 * kChains * (kIters / 64)});
#endif
  return v;
}

Isa pick(const char* want) {
  const std::vector<Isa> v = supported();
  for (const Isa& i : v)
    if (want ? std::strcmp(want, i.name) == 0 : std::strstr(i.name, "bf16") == nullptr && std::strcmp(i.name, "amx") != 0)
      return i;
  return {want ? want : "none", nullptr, 0};
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  const Isa isa = pick(argc > 3 ? argv[3] : nullptr);
  if (!isa.run) {
    std::printf("{\"threads\":%d,\"isa\":\"%s\",\"gflops\":null}\n", threads, isa.name);
    return 0;
  }
  // Calibrate one thread's reps for ~seconds/4, then time `threads` threads together, best of 3.
  long reps = 1;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    volatile double sink = isa.run(reps);
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > seconds / 4) break;
    reps *= 2;
  }
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    std::vector<double> sinks(static_cast<size_t>(threads), 0.0);
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) {
        }
        sinks[size_t(t)] = isa.run(reps);
      });
    while (ready.load() < threads) {
    }
    auto t0 = std::chrono::steady_clock::now();
    go.store(true);
    for (auto& th : ts) th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, isa.flops_per_rep * double(reps) * threads / s / 1e9);
  }
  std::printf("{\"threads\":%d,\"isa\":\"%s\",\"gflops\":%.1f}\n", threads, isa.name, best);
  return 0;
}
