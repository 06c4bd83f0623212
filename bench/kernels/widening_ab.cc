// The two AVX2 bf16 widenings (CpuFeatures::bf16_unpack in native/common/cpu_features.h) side by side in
// one process: a Qwen3.5 vision block's four linears, on one backend per widening (each packs its
// own copy of the weights at load, in its own layout), the two taking turns call by call so that a
// noisy machine's drift falls on both alike. Prints, per linear, each widening's median and best
// time and the median of the per-turn ratios, and checks that both give the same bits. This is how
// the choice per CPU vendor was measured (docs/cpu.md#the-bf16-widening-chosen-per-vendor).
// Not a test; built and run by `node bench/kernels/run.mjs --widening-ab [options]`:
//   --threads T (1)  --rows 256,1120  --reps R (15)  --copies K (4: each call takes the next of K
//   weight sets, so that weights come from memory as in a real tower)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "cpu/cpu_backend.h"
#include "bench_inputs.h"

using namespace tessera;
using namespace tessera::backend;

namespace {

struct Linear {
  const char* name;
  int64_t out, in;
};
// The block's linears (hidden 1152, MLP 4304), as bench/kernels/cpu_kernels.cc runs them.
const Linear kLinears[] = {{"qkv 1152->3456", 3456, 1152},
                           {"proj 1152->1152", 1152, 1152},
                           {"fc1 1152->4304", 4304, 1152},
                           {"fc2 4304->1152", 1152, 4304}};

// One widening's backend, its weight sets (packed at load) and its activations.
struct Side {
  std::unique_ptr<Backend> be;
  std::vector<std::vector<Tensor>> w;  // [linear][copy]
  Tensor x, y;                          // x: [N, 4304] (a linear reads its first `in` columns), y: [N, 4304]
};

Side make_side(int threads, bool unpack, int64_t N, int copies) {
  Side s;
  s.be = cpu::make_cpu_backend_avx2(threads, unpack);
  for (size_t l = 0; l < std::size(kLinears); ++l) {
    s.w.emplace_back();
    for (int c = 0; c < copies; ++c) {
      Tensor w = random_tensor(*s.be, kLinears[l].out, kLinears[l].in, DType::BF16, 0.03f, uint32_t(100 * l + c));
      s.be->pack_weight(w);
      s.w.back().push_back(w);
    }
  }
  s.x = random_tensor(*s.be, N, 4304, DType::F32, 1.0f, 7);
  s.y = random_tensor(*s.be, N, 4304, DType::F32, 1.0f, 8);
  return s;
}

double run(Side& s, size_t l, int copy) {
  const Linear& L = kLinears[l];
  Tensor y = s.y.cols_view(0, L.out), x = s.x.cols_view(0, L.in);
  const auto t0 = std::chrono::steady_clock::now();
  s.be->linear(y, x, s.w[l][size_t(copy)], LinearArgs{});
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool same_bits(const Side& a, const Side& b, int64_t cols) {
  for (int64_t r = 0; r < a.y.rows; ++r)
    if (std::memcmp(a.y.host_ptr<float>(r), b.y.host_ptr<float>(r), size_t(cols) * 4) != 0) return false;
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 15, copies = 4;
  std::vector<int64_t> rows_list = {256, 1120};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--copies") copies = std::max(1, std::atoi(v.c_str()));
    else if (a == "--rows") rows_list = int_list(v);
  }
  std::printf("AVX2 bf16 widening, shift and mask vs unpacks; this CPU's choice: %s\n", bf16_widening());
  for (const int64_t N : rows_list) {
    Side sides[2] = {make_side(threads, false, N, copies), make_side(threads, true, N, copies)};
    std::printf("== %d thread%s, N = %lld, %d weight copies, %d turns each (ms: median / best)\n", threads,
                threads == 1 ? "" : "s", (long long)N, copies, reps);
    std::printf("  %-18s %17s %17s %16s %10s\n", "linear", "shift and mask", "unpacks", "shift/unpacks", "same bits");
    double total[2] = {0, 0};
    for (size_t l = 0; l < std::size(kLinears); ++l) {
      std::vector<double> ms[2], ratio;
      run(sides[0], l, 0), run(sides[1], l, 0);  // warm-up; both from the same inputs and weights
      const bool same = same_bits(sides[0], sides[1], kLinears[l].out);
      for (int r = 0; r < reps; ++r) {
        const int first = r % 2, copy = (r + 1) % copies;  // alternate which side goes first
        double t[2];
        t[first] = run(sides[first], l, copy);
        t[1 - first] = run(sides[1 - first], l, copy);
        ms[0].push_back(t[0]), ms[1].push_back(t[1]), ratio.push_back(t[0] / t[1]);
      }
      const double m0 = median(ms[0]), m1 = median(ms[1]);
      total[0] += m0, total[1] += m1;
      std::printf("  %-18s %8.2f / %6.2f %8.2f / %6.2f %15.3fx %10s\n", kLinears[l].name, m0,
                  *std::min_element(ms[0].begin(), ms[0].end()), m1, *std::min_element(ms[1].begin(), ms[1].end()),
                  median(ratio), same ? "yes" : "NO");
    }
    std::printf("  %-18s %8.2f %17.2f %16.3fx (sum of the medians)\n", "all four", total[0], total[1],
                total[0] / total[1]);
  }
  return 0;
}
