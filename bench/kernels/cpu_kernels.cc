// Micro-benchmark of the CPU backend's ops at the real Qwen3.5 vision-tower shapes (hidden 1152,
// 16 heads of 72, MLP 4304): prints ms and GFLOP/s per op and per block, for each SIMD level.
// Not a test; built and run by bench/kernels/run.mjs. Best of --reps runs (this machine is
// shared: the best run is the one least disturbed).
//   bench-kernels [--threads T] [--simd scalar|avx2|avx512] [--rows 1120,4096] [--reps 3] [--dtype bf16|f32|f16]
//                 [--hd 72|64] [--per-call 1] [--only attention] [--copies 4] [--precision bf16]
// --only: the ops whose name contains it. --copies K: K sets of weights, each call of a linear the
// next set, so that (K >= 4) its weights come from memory as in a real tower, not from the cache.
// Weights are packed at load as the `resident` store packs them (Backend::pack_weight); --per-call 1
// leaves them row-major, as `mapped` and `stream` read them (packed per call).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "cpu/cpu_backend.h"
#include "bench_inputs.h"

using namespace tessera;
using namespace tessera::backend;

namespace {

double cpu_ms() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

struct Timing {
  double wall = 1e30, cpu = 1e30;  // best wall ms; best process CPU ms (all threads)
};

Timing best_of(int reps, const std::function<void()>& fn) {
  fn();  // warm-up (first touch of scratch, caches)
  Timing t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_ms();
    fn();
    t.cpu = std::min(t.cpu, cpu_ms() - c0);
    t.wall = std::min(t.wall, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 3;
  bool per_call = false;
  int copies = 1;
  std::vector<int64_t> rows_list = {1120, 4096};
  std::vector<cpu::Simd> levels = cpu::supported_simd();
  DType wdt = DType::BF16;
  std::string only;
  int64_t head_dim = 72;  // --hd 64: Gemma 4's other head size (18 heads over the same width)
  cpu::Precision precision = cpu::Precision::F32;  // --precision bf16: the linears on a bf16 level's bf16 GEMM
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--hd") head_dim = std::atoll(v.c_str());
    else if (a == "--per-call") per_call = v != "0";
    else if (a == "--copies") copies = std::max(1, std::atoi(v.c_str()));
    else if (a == "--only") only = v;
    else if (a == "--dtype") parse_dtype(v, &wdt);
    else if (a == "--rows") rows_list = int_list(v);
    else if (a == "--precision") precision = v == "bf16" ? cpu::Precision::Bf16 : cpu::Precision::F32;
    else if (a == "--simd") {
      levels.clear();
      for (cpu::Simd s : cpu::supported_simd())
        if (v == cpu::simd_name(s)) levels.push_back(s);
    }
  }
  const int nthreads = threads > 0 ? threads : ThreadPool::physical_cores();
  const int64_t D = 1152, F = 4304, HD = head_dim, H = D / HD;
  for (cpu::Simd level : levels) {
    auto be = cpu::make_cpu_backend(threads, level, precision);
    Backend& b = *be;
    // copies x (qkv, proj, fc1, fc2); each call of a linear takes the next copy of its weight.
    struct Copies {
      std::vector<Tensor> w;
      size_t turn = 0;
      const Tensor& next() { return w[turn++ % w.size()]; }
    } wq, wp, wu, wd;
    for (int c = 0; c < copies; ++c) {
      wq.w.push_back(random_tensor(b, 3 * D, D, wdt, 0.03f, 1));
      wp.w.push_back(random_tensor(b, D, D, wdt, 0.03f, 3));
      wu.w.push_back(random_tensor(b, F, D, wdt, 0.03f, 5));
      wd.w.push_back(random_tensor(b, D, F, wdt, 0.015f, 7));
    }
    Tensor bqkv = random_tensor(b, 1, 3 * D, wdt, 0.02f, 2), bproj = random_tensor(b, 1, D, wdt, 0.02f, 4);
    Tensor b1 = random_tensor(b, 1, F, wdt, 0.02f, 6), b2 = random_tensor(b, 1, D, wdt, 0.02f, 8);
    Tensor g = random_tensor(b, 1, D, DType::F32, 1.0f, 9), beta = random_tensor(b, 1, D, DType::F32, 0.1f, 10);
    if (!per_call)
      for (Copies* set : {&wq, &wp, &wu, &wd})
        for (Tensor& w : set->w) b.pack_weight(w);
    for (int64_t N : rows_list) {
      Tensor x = random_tensor(b, N, D, DType::F32, 1.0f, 11), h = random_tensor(b, N, D, DType::F32, 1.0f, 12);
      Tensor qkv = random_tensor(b, N, 3 * D, DType::F32, 1.0f, 13), attn = random_tensor(b, N, D, DType::F32, 1.0f, 14);
      Tensor mlp = random_tensor(b, N, F, DType::F32, 1.0f, 15);
      // Rotations (cos^2 + sin^2 = 1), so repeated runs keep q and k at their scale.
      Tensor cosv = random_tensor(b, N, HD, DType::F32, 1.0f, 16), sinv = random_tensor(b, N, HD, DType::F32, 1.0f, 16);
      for (int64_t i = 0; i < N * HD; ++i) {
        float a = cosv.host_ptr<float>()[i];
        cosv.host_ptr<float>()[i] = std::cos(a);
        sinv.host_ptr<float>()[i] = std::sin(a);
      }
      std::vector<Segment> segs = {{0, N}};
      const std::string attn_name = "attention " + std::to_string(H) + "x" + std::to_string(HD);
      struct Row {
        const char* name;
        double flop;
        std::function<void()> fn;
      };
      LinearArgs aq, ap, a1, a2;
      aq.bias = &bqkv;
      ap.bias = &bproj, ap.residual = &x;
      a1.bias = &b1, a1.act = Act::GeluTanh;
      a2.bias = &b2, a2.residual = &x;
      const double n = double(N);
      std::vector<Row> rows = {
          {"layer_norm", 0, [&] { b.layer_norm(h, x, g, beta, 1e-6f); }},
          {"qkv 1152->3456 +bias", 2 * n * D * 3 * D, [&] { b.linear(qkv, h, wq.next(), aq); }},
          {"rope q, k (sections 1)", 0,
           [&] {
             b.rope(qkv.cols_view(0, 2 * D), cosv, sinv, 2 * H, HD, 1, nullptr);  // q and k in one, as the tower
           }},
          {attn_name.c_str(), 4 * n * n * D,
           [&] {
             b.attention(attn, qkv.cols_view(0, D), qkv.cols_view(D, D), qkv.cols_view(2 * D, D), H, HD,
                         1.0f / std::sqrt(float(HD)), segs);
           }},
          {"proj 1152->1152 +bias+res", 2 * n * D * D, [&] { b.linear(x, attn, wp.next(), ap); }},
          {"fc1 1152->4304 +bias+gelu", 2 * n * D * F, [&] { b.linear(mlp, h, wu.next(), a1); }},
          {"fc2 4304->1152 +bias+res", 2 * n * F * D, [&] { b.linear(x, mlp, wd.next(), a2); }},
      };
      double total_ms = 0, total_cpu = 0, total_flop = 0;
      std::printf("== %s, precision %s, %d threads, N=%lld, weights %s, %s, %d cop%s\n", cpu::simd_name(level),
                  b.precision(), nthreads, (long long)N, dtype_name(wdt), per_call ? "packed per call" : "packed at load", copies, copies == 1 ? "y" : "ies");
      // "per-cpu": the rate if the threads had the cores to themselves (FLOPs over process CPU
      // time / threads): a steadier figure while other work shares the machine.
      std::printf("  %-28s %9s %8s %10s\n", "op", "ms", "GFLOP/s", "per-cpu");
      for (Row& r : rows) {
        if (!only.empty() && std::string(r.name).find(only) == std::string::npos) continue;
        Timing t = best_of(reps, r.fn);
        total_ms += t.wall;
        total_cpu += t.cpu;
        total_flop += r.flop;
        if (r.flop > 0)
          std::printf("  %-28s %9.2f %8.1f %10.1f\n", r.name, t.wall, r.flop / t.wall / 1e6,
                      r.flop / (t.cpu / nthreads) / 1e6);
        else std::printf("  %-28s %9.2f\n", r.name, t.wall);
      }
      Timing ln = best_of(reps, rows[0].fn);  // layer_norm runs twice per block
      total_ms += ln.wall;
      total_cpu += ln.cpu;
      std::printf("  %-28s %9.2f %8.1f %10.1f  (27 blocks: %.2f s)\n", "block (2 LN)", total_ms,
                  total_flop / total_ms / 1e6, total_flop / (total_cpu / nthreads) / 1e6, 27 * total_ms / 1000);
      std::fflush(stdout);
    }
  }
  return 0;
}
