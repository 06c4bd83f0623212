// Thread scaling of the CPU backend on Qwen3.5-size blocks, without Node: the towers' own block
// (native/models/vit/block.cc, as the Qwen3 tower configures it: LayerNorm, qkv, rope, attention,
// proj + residual, LayerNorm, fc1 + tanh-GELU, fc2 + residual, in the tower's row chunks) on the
// CPU backend, over `blocks` distinct blocks
// of random bf16 weights packed as the resident store packs them (so every block's weights come
// from memory, as in a real tower), at each thread count given. Built and run by
// scripts/bench/scaling.mjs; it is also how the figures for machines without Node were taken:
//   c++ -O3 -std=c++20 -ffp-contract=off -pthread -Inative scripts/bench/scaling/block.cc
//       $(node gyp/sources.mjs --no-addon) -o block        (one command line)
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
#include "models/vision_model.h"
#include "models/vit/block.h"

using namespace tessera;
using backend::Tensor;

namespace {

constexpr int64_t D = 1152, HEADS = 16, HD = 72, INTER = 4304;

const vit::BlockConfig kQwen35{.hidden = D, .heads = HEADS, .head_dim = HD, .inter = INTER, .eps = 1e-6f,
                               .norm = vit::Norm::Layer, .mlp = vit::Mlp::Plain, .act = backend::Act::GeluTanh,
                               .norm1 = "norm1", .norm2 = "norm2", .qkv = "attn.qkv", .proj = "attn.proj",
                               .up = "mlp.linear_fc1", .gate = "", .down = "mlp.linear_fc2"};

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
    std::vector<StageWeights> blocks(static_cast<size_t>(nblocks));
    const float ws = 1.0f / std::sqrt(float(D));
    for (StageWeights& w : blocks) {
      auto linear = [&](const std::string& role, int64_t out, int64_t in, float scale) {
        Tensor t = random_tensor(b, rng, out, in, DType::BF16, scale);
        b.pack_weight(t);  // as the resident store packs them
        w.set(role + ".weight", t);
        w.set(role + ".bias", random_tensor(b, rng, 1, out, DType::BF16, 0.1f));
      };
      linear(kQwen35.qkv, 3 * D, D, ws);
      linear(kQwen35.proj, D, D, ws);
      linear(kQwen35.up, INTER, D, ws);
      linear(kQwen35.down, D, INTER, 1.0f / std::sqrt(float(INTER)));
      for (const std::string& norm : {kQwen35.norm1, kQwen35.norm2}) {
        w.set(norm + ".weight", random_tensor(b, rng, 1, D, DType::BF16, 1.0f));
        w.set(norm + ".bias", random_tensor(b, rng, 1, D, DType::BF16, 0.1f));
      }
    }
    const int64_t chunk = std::min(n, chunk_rows(n, kRowChunk, 4));  // the Qwen3 tower's row chunk
    vit::BlockTensors t;
    t.x = random_tensor(b, rng, n, D, DType::F32, 1.0f);
    t.cos = random_tensor(b, rng, n, HD, DType::F32, 1.0f);
    t.sin = random_tensor(b, rng, n, HD, DType::F32, 1.0f);
    t.qkv = random_tensor(b, rng, n, 3 * D, DType::F32, 1.0f);
    t.h = random_tensor(b, rng, chunk, D, DType::F32, 1.0f);
    t.up = random_tensor(b, rng, chunk, INTER, DType::F32, 1.0f);
    const std::vector<backend::Segment> seg = {{0, n}};
    auto pass = [&] {
      for (const StageWeights& w : blocks) {
        vit::run_block(b, kQwen35, w, t, seg);
        vit::norm(b, vit::Norm::Layer, t.x, t.x, w, kQwen35.norm1, 1e-6f);  // keeps x bounded over many passes (not in the model)
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
