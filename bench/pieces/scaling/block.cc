// Thread scaling of the CPU backend on Qwen3.5-size blocks, without Node: the op sequence of one
// block (native/models/qwen_vision.cc run_block: LayerNorm, qkv, rope, attention, proj + residual,
// LayerNorm, fc1 + tanh-GELU, fc2 + residual) through backend::Backend, over `blocks` distinct blocks
// of random bf16 weights packed as the resident store packs them (so every block's weights come
// from memory, as in a real tower), at each thread count given. Built and run by
// scripts/bench/scaling.mjs; it is also how the figures for machines without Node were taken:
//   c++ -O3 -std=c++20 -ffp-contract=off -pthread -Inative scripts/bench/scaling/block.cc
//       native/common/*.cc native/cpu/*.cc native/backend/*.cc -o block        (one command line)
//   ./block N blocks runs threads...      -> one JSON line per thread count
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "cpu/cpu_backend.h"

using namespace tessera;
using backend::Tensor;

namespace {

constexpr int64_t D = 1152, HEADS = 16, HD = 72, INTER = 4304;

struct Block {
  Tensor qkv, proj, fc1, fc2, qkv_b, proj_b, fc1_b, fc2_b, n1g, n1b, n2g, n2b;
};

Tensor random_tensor(backend::Backend& b, std::mt19937& rng, int64_t rows, int64_t cols, DType dt, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  const size_t n = size_t(rows) * size_t(cols), es = dtype_size(dt);
  std::vector<char> host(n * es);
  for (size_t i = 0; i < n; ++i) {
    float v = u(rng);
    if (dt == DType::BF16) {
      uint16_t h = f32_to_bf16(v);
      std::memcpy(&host[i * 2], &h, 2);
    } else {
      std::memcpy(&host[i * 4], &v, 4);
    }
  }
  backend::Buffer* buf = b.alloc(host.size());
  b.upload(buf, 0, host.data(), host.size());
  return backend::make_tensor(buf, 0, dt, rows, cols);
}

double block_flops(int64_t n) { return 2.0 * n * (D * 3 * D + D * D + 2.0 * D * INTER) + 4.0 * n * n * D; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: block N blocks runs threads...\n");
    return 2;
  }
  const int64_t n = std::atoll(argv[1]);
  const int nblocks = std::atoi(argv[2]), runs = std::atoi(argv[3]);
  for (int a = 4; a < argc; ++a) {
    const int threads = std::atoi(argv[a]);
    auto be = cpu::make_cpu_backend(threads);
    backend::Backend& b = *be;
    std::mt19937 rng(7);
    std::vector<Block> blocks(static_cast<size_t>(nblocks));
    const float ws = 1.0f / std::sqrt(float(D));
    for (Block& k : blocks) {
      k.qkv = random_tensor(b, rng, 3 * D, D, DType::BF16, ws);
      k.proj = random_tensor(b, rng, D, D, DType::BF16, ws);
      k.fc1 = random_tensor(b, rng, INTER, D, DType::BF16, ws);
      k.fc2 = random_tensor(b, rng, D, INTER, DType::BF16, 1.0f / std::sqrt(float(INTER)));
      for (Tensor* w : {&k.qkv, &k.proj, &k.fc1, &k.fc2}) b.pack_weight(*w);
      k.qkv_b = random_tensor(b, rng, 1, 3 * D, DType::BF16, 0.1f);
      k.proj_b = random_tensor(b, rng, 1, D, DType::BF16, 0.1f);
      k.fc1_b = random_tensor(b, rng, 1, INTER, DType::BF16, 0.1f);
      k.fc2_b = random_tensor(b, rng, 1, D, DType::BF16, 0.1f);
      k.n1g = random_tensor(b, rng, 1, D, DType::BF16, 1.0f);
      k.n1b = random_tensor(b, rng, 1, D, DType::BF16, 0.1f);
      k.n2g = random_tensor(b, rng, 1, D, DType::BF16, 1.0f);
      k.n2b = random_tensor(b, rng, 1, D, DType::BF16, 0.1f);
    }
    Tensor x = random_tensor(b, rng, n, D, DType::F32, 1.0f), h = random_tensor(b, rng, n, D, DType::F32, 1.0f);
    Tensor qkv = random_tensor(b, rng, n, 3 * D, DType::F32, 1.0f), attn = random_tensor(b, rng, n, D, DType::F32, 1.0f);
    Tensor mlp = random_tensor(b, rng, n, INTER, DType::F32, 1.0f);
    Tensor cs = random_tensor(b, rng, n, HD, DType::F32, 1.0f), sn = random_tensor(b, rng, n, HD, DType::F32, 1.0f);
    const std::vector<backend::Segment> seg = {{0, n}};
    auto pass = [&] {
      for (const Block& k : blocks) {
        b.layer_norm(h, x, k.n1g, k.n1b, 1e-6f);
        backend::LinearArgs a;
        a.bias = &k.qkv_b;
        b.linear(qkv, h, k.qkv, a);
        Tensor q = qkv.cols_view(0, D), kk = qkv.cols_view(D, D), v = qkv.cols_view(2 * D, D);
        b.rope(qkv.cols_view(0, 2 * D), cs, sn, 2 * HEADS, HD, 1, nullptr);  // q and k in one, as the tower
        b.attention(attn, q, kk, v, HEADS, HD, float(1.0 / std::sqrt(double(HD))), seg);
        backend::LinearArgs p;
        p.bias = &k.proj_b;
        p.residual = &x;
        b.linear(x, attn, k.proj, p);
        b.layer_norm(h, x, k.n2g, k.n2b, 1e-6f);
        backend::LinearArgs up;
        up.bias = &k.fc1_b;
        up.act = backend::Act::GeluTanh;
        b.linear(mlp, h, k.fc1, up);
        backend::LinearArgs down;
        down.bias = &k.fc2_b;
        down.residual = &x;
        b.linear(x, mlp, k.fc2, down);
        b.layer_norm(x, x, k.n1g, k.n1b, 1e-6f);  // keeps x bounded over many passes (not in the model)
      }
    };
    pass();  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      pass();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("{\"n\":%lld,\"blocks\":%d,\"threads\":%d,\"ms_per_block\":%.3f,\"gflops\":%.1f,\"simd\":\"%s\"}\n",
                (long long)n, nblocks, threads, med / nblocks, block_flops(n) * nblocks / (med / 1000) / 1e9,
                cpu::simd_name(cpu::best_simd()));
    std::fflush(stdout);
  }
  return 0;
}
