// fakemetal-smoke (docs/metal-on-linux.md#fake-metal): the same op sequence through two backends that share
// the op layer and the emulator:
//   metal           MetalBackend -> native/metal/device.mm (MRC build) -> fake_metal.mm -> MSL emulator
//   metal-emulated  MetalBackend -> EmuExecutor -> MSL emulator
// Same kernels, same schedule (forward, poison ff, one worker): the outputs must be bit-identical, so any
// index, offset, binding or grid mistake in device.mm shows up. Also: wrapped memory that is not page
// aligned, an injected command-buffer failure reaching the caller as ERR_GPU (and the completion handler
// still releasing what the batch used). The capability check: an Apple5 "Apple Paravirtual device" and a GPU
// with too little threadgroup memory refused with ERR_BACKEND_UNAVAILABLE naming the GPU and what it lacks.
// The precompiled kernels: a tessera.metallib holding the sources' stamp kernel is used (no source compile),
// one without it is ignored. Prints one line per case, then "N passed, N failed".
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/aligned.h"
#include "common/dtype.h"
#include "common/error.h"
#include "metal/device.h"
#include "metal/emu_executor.h"
#include "metal/metal_backend.h"
#include "sources.gen.h"  // build/metal: the embedded kernel sources and the metallib stamp

extern "C" int fake_metal_source_compiles(void);  // fake_metal.mm
using namespace tessera;
using namespace tessera::backend;

static int passed = 0, failed = 0;
static void verdict(bool ok, const std::string& name, const std::string& msg) {
  (ok ? passed : failed)++;
  std::printf("[%s] %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stdout);
}

struct In {
  int64_t rows, cols;
  DType dt;
  std::vector<char> bytes;
};
static In make(std::mt19937& g, int64_t rows, int64_t cols, DType dt = DType::F32, float lo = -1, float hi = 1) {
  In m{rows, cols, dt, std::vector<char>(size_t(rows * cols) * dtype_size(dt))};
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < rows * cols; i++) {
    const float x = u(g);
    if (dt == DType::F32) std::memcpy(m.bytes.data() + i * 4, &x, 4);
    else {
      const uint16_t h = dt == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
      std::memcpy(m.bytes.data() + i * 2, &h, 2);
    }
  }
  return m;
}

struct Case {
  std::string name;
  std::vector<In> in;
  std::function<void(Backend&, std::vector<Tensor>&)> op;
  int out;
  std::vector<int> acts = {};  // the activation inputs: half in the precision 'f16' pass
};

// An f32 input as half (precision 'f16' activations).
// m's values stored as `to` (f16 or bf16): the activations of precision 'f16' / 'bf16'.
static In as_reduced(const In& m, DType to) {
  In h{m.rows, m.cols, to, std::vector<char>(size_t(m.rows * m.cols) * 2)};
  for (int64_t i = 0; i < m.rows * m.cols; i++) {
    float x;
    std::memcpy(&x, m.bytes.data() + i * 4, 4);
    const uint16_t b = to == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
    std::memcpy(h.bytes.data() + i * 2, &b, 2);
  }
  return h;
}

static std::vector<float> run(Backend& b, const Case& c) {
  std::vector<Buffer*> bufs;
  std::vector<Tensor> ts;
  for (const In& m : c.in) {
    Buffer* buf = b.alloc(m.bytes.size());
    b.upload(buf, 0, m.bytes.data(), m.bytes.size());
    bufs.push_back(buf);
    ts.push_back(make_tensor(buf, 0, m.dt, m.rows, m.cols));
  }
  c.op(b, ts);
  bool released = false;
  b.submit([&] { released = true; });
  std::vector<float> out(size_t(ts[size_t(c.out)].rows * ts[size_t(c.out)].cols));
  b.download(out.data(), ts[size_t(c.out)]);
  if (!released) throw std::runtime_error("the completion handler never ran");
  for (Buffer* x : bufs) b.release(x);
  return out;
}

int main() {
  std::unique_ptr<Backend> gpu, emu, gpu16, emu16, gpub, emub;
  try {
    gpu = mtl::make_metal_backend(mtl::make_metal_executor(), "metal");
    mtl::EmuOptions o;
    o.schedule = 0, o.poison = 0xFF, o.workers = 1;
    emu = mtl::make_metal_backend(mtl::make_emu_executor(o), "metal-emulated");
    gpu16 = mtl::make_metal_backend(mtl::make_metal_executor(), "metal", mtl::Precision::F16);  // precision 'f16': the half kernels
    emu16 = mtl::make_metal_backend(mtl::make_emu_executor(o), "metal-emulated", mtl::Precision::F16);
    gpub = mtl::make_metal_backend(mtl::make_metal_executor(), "metal", mtl::Precision::Bf16);  // the bfloat kernels (MSL 3.1)
    emub = mtl::make_metal_backend(mtl::make_emu_executor(o), "metal-emulated", mtl::Precision::Bf16);
  } catch (const std::exception& e) {
    std::printf("[FAIL] setup: %s\n0 passed, 1 failed\n", e.what());
    return 1;
  }
  std::mt19937 g(5);
  std::vector<Case> cases;
  for (DType wd : {DType::F32, DType::F16, DType::BF16})
    for (int64_t rows : {3, 33}) {
      Case c{std::string("linear ") + dtype_name(wd) + (rows <= 4 ? " (matvec)" : " (matmul)"),
             {make(g, rows, 40), make(g, 35, 40, wd), make(g, 1, 35), make(g, rows, 35)}, nullptr, 3};
      c.op = [](Backend& b, std::vector<Tensor>& t) {
        LinearArgs a;
        a.bias = &t[2];
        a.residual = &t[3];
        a.act = Act::GeluErf;
        b.linear(t[3], t[0], t[1], a);
      };
      c.acts = {0, 3};
      cases.push_back(c);
    }
  cases.push_back({"layer_norm", {make(g, 5, 70), make(g, 1, 70, DType::BF16), make(g, 1, 70, DType::F16)}, [](Backend& b, std::vector<Tensor>& t) { b.layer_norm(t[0], t[0], t[1], t[2], 1e-6f); }, 0, {0}});
  cases.push_back({"rms_norm row + per-head adding a residual", {make(g, 5, 64), make(g, 1, 64), make(g, 1, 16)}, [](Backend& b, std::vector<Tensor>& t) {
                     b.rms_norm(t[0], t[0], &t[1], 64, 1e-6f, nullptr);
                     b.rms_norm(t[0], t[0], &t[2], 16, 1e-6f, &t[0]);
                   }, 0, {0}});
  cases.push_back({"add, affine", {make(g, 9, 33), make(g, 9, 33), make(g, 1, 33, DType::F16)}, [](Backend& b, std::vector<Tensor>& t) {
                     b.affine(t[0], t[0], nullptr, nullptr, 2.0f, 0.5f);
                     b.add(t[0], t[0], t[1]);
                     b.affine(t[0], t[0], &t[2], &t[2], 1.5f, 0.0f);
                   }, 0, {0, 1}});
  cases.push_back({"rope (2 sections; k with a head norm) + attention (2 segments)",
                   {make(g, 20, 3 * 64), make(g, 20, 32), make(g, 20, 32), make(g, 20, 64), make(g, 1, 32)},
                   [](Backend& b, std::vector<Tensor>& t) {
                     Tensor q = t[0].cols_view(0, 64), k = t[0].cols_view(64, 64), v = t[0].cols_view(128, 64);
                     const HeadNorm k_norm{&t[4], 1e-6f};
                     b.rope(q, t[1], t[2], 2, 32, 2, nullptr);
                     b.rope(k, t[1], t[2], 2, 32, 2, &k_norm);
                     b.attention(t[3], q, k, v, 2, 32, 0.2f, {{0, 7}, {7, 13}});
                     b.attention(t[3], q, k, v, 2, 32, 0.2f, {{0, 7}, {7, 13}}, AttnProducts::F32);  // f16 / bf16: float tiles
                   }, 3, {0, 3}});
  {
    std::vector<int32_t> idx(12 * 4);
    std::vector<float> w(12 * 4);
    for (size_t i = 0; i < idx.size(); i++) idx[i] = int32_t(i * 7 % 10) - 1, w[i] = 0.25f * float(i % 5);
    In lk{1, int64_t(idx.size() * 2), DType::F32, std::vector<char>(idx.size() * 8)};
    std::memcpy(lk.bytes.data(), idx.data(), idx.size() * 4);
    std::memcpy(lk.bytes.data() + idx.size() * 4, w.data(), w.size() * 4);
    cases.push_back({"gather_sum (bf16 table)", {make(g, 12, 40), make(g, 9, 40, DType::BF16), lk},
                     [](Backend& b, std::vector<Tensor>& t) { b.gather_sum(t[0], t[1], t[2].buf, 4, true); }, 0, {0}});
  }
  // One case through device.mm (gpu) and the emulator (emu): the same bits, all finite.
  auto compare = [](Backend& gpu, Backend& emu, const Case& c) {
    try {
      const std::vector<float> a = run(gpu, c), e = run(emu, c);
      bool finite = true;
      for (float v : a) finite &= std::isfinite(v);
      const bool same = a.size() == e.size() && std::memcmp(a.data(), e.data(), a.size() * 4) == 0;
      verdict(same && finite, c.name, same ? (finite ? "bit-identical through device.mm" : "non-finite output") : "device.mm path differs from metal-emulated");
    } catch (const std::exception& ex) {
      verdict(false, c.name, ex.what());
    }
  };
  for (const Case& c : cases) {
    compare(*gpu, *emu, c);
    if (c.acts.empty()) continue;
    // precisions 'f16' and 'bf16': the activations half / bfloat, the same op through device.mm and the emulator
    if (std::string(gpub->precision()) != "bf16") verdict(false, c.name + " [bf16]", std::string("device.mm ran bf16 as ") + gpub->precision());
    for (DType to : {DType::F16, DType::BF16}) {
      Case h = c;
      h.name += std::string(" [") + dtype_name(to) + "]";
      for (int i : c.acts) h.in[size_t(i)] = as_reduced(c.in[size_t(i)], to);
      const bool bf = to == DType::BF16;
      compare(bf ? *gpub : *gpu16, bf ? *emub : *emu16, h);
    }
  }
  {  // wrapped host memory that is not page aligned: device.mm wraps the whole pages around it
    AlignedBuffer block(3 * 16384, 16384);
    float* x = reinterpret_cast<float*>(static_cast<char*>(block.data()) + 100);
    std::vector<float> outs[2];
    int k = 0;
    for (Backend* b : {gpu.get(), emu.get()}) {
      for (int i = 0; i < 64; i++) x[i] = float(i) * 0.25f - 5.0f;  // the op runs in place: same input for both
      try {
        Buffer* w = b->wrap_host(x, 64 * 4);
        Tensor t = make_tensor(w, 0, DType::F32, 4, 16);
        b->affine(t, t, nullptr, nullptr, 1.5f, 0.25f);
        outs[k].resize(64);
        b->download(outs[k].data(), t);
        b->release(w);
      } catch (const std::exception& ex) {
        verdict(false, "wrap of unaligned host memory", ex.what());
      }
      k++;
    }
    verdict(outs[0].size() == 64 && std::memcmp(outs[0].data(), outs[1].data(), 256) == 0, "wrap of host memory at page offset 100", "");
  }
  {  // a wrapped region larger than maxBufferLength (a big mapped file): device.mm binds overlapping views
    setenv("TESSERA_FAKE_METAL_MAX_BUFFER", "65536", 1);  // read by the executor at creation
    std::unique_ptr<Backend> small;
    try {
      small = mtl::make_metal_backend(mtl::make_metal_executor(), "metal");
    } catch (const std::exception& e) {
      verdict(false, "views past maxBufferLength", e.what());
    }
    unsetenv("TESSERA_FAKE_METAL_MAX_BUFFER");
    if (small) {
      AlignedBuffer region(262144 + 16384, 16384);
      const int64_t cols = 1000, rows = int64_t(262144 / 4 / cols);
      std::vector<float> outs[2];
      int k = 0;
      for (Backend* b : {small.get(), emu.get()}) {
        float* x = reinterpret_cast<float*>(static_cast<char*>(region.data()) + 40);
        for (int64_t i = 0; i < rows * cols; i++) x[i] = float(i % 97) * 0.01f - 0.4f;
        try {
          Buffer* w = b->wrap_host(x, size_t(rows * cols * 4));
          Tensor all = make_tensor(w, 0, DType::F32, rows, cols);
          for (int64_t r0 = 0; r0 < rows; r0 += 5) {  // 20 KB views at every offset across the 256 KiB region
            Tensor t = all.rows_view(r0, std::min<int64_t>(5, rows - r0));
            b->affine(t, t, nullptr, nullptr, 1.5f, 0.25f);
          }
          outs[k].resize(size_t(rows * cols));
          b->download(outs[k].data(), all);
          b->release(w);
        } catch (const std::exception& e) {
          verdict(false, std::string("views past maxBufferLength (") + b->name() + ")", e.what());
        }
        k++;
      }
      verdict(!outs[0].empty() && outs[0] == outs[1], "a 256 KiB wrap on a device with maxBufferLength 64 KiB (overlapping views)", "");
    }
  }
  {  // an injected GPU failure: ERR_GPU naming it, and the batch's completion handler still ran
    setenv("TESSERA_FAKE_METAL_FAIL", "ew_affine", 1);
    bool released = false;
    std::string msg;
    try {
      Buffer* buf = gpu->alloc(256);
      Tensor t = make_tensor(buf, 0, DType::F32, 4, 16);
      gpu->affine(t, t, nullptr, nullptr, 1.0f, 0.0f);
      gpu->submit([&] { released = true; });
      gpu->finish();
    } catch (const Error& e) {
      if (e.code() == Code::Gpu) msg = e.what();
    }
    unsetenv("TESSERA_FAKE_METAL_FAIL");
    verdict(released && msg.find("injected failure in ew_affine") != std::string::npos, "command-buffer failure -> ERR_GPU, slots still released",
            msg.empty() ? "no ERR_GPU" : msg);
  }
  // The capability check (metal/capability.h) when a tower opens: each device profile of the fake.
  const auto refusal = [](const char* gpu_env, const char* tg_env) -> std::string {
    if (gpu_env) setenv("TESSERA_FAKE_METAL_GPU", gpu_env, 1);
    if (tg_env) setenv("TESSERA_FAKE_METAL_TG_MEMORY", tg_env, 1);
    std::string msg = "no error";
    try {
      mtl::make_metal_executor();
    } catch (const Error& e) {
      msg = (e.code() == Code::BackendUnavailable ? "ERR_BACKEND_UNAVAILABLE: " : "wrong code: ") + std::string(e.what());
    }
    unsetenv("TESSERA_FAKE_METAL_GPU");
    unsetenv("TESSERA_FAKE_METAL_TG_MEMORY");
    return msg;
  };
  {
    const std::string m = refusal("apple5", nullptr);
    verdict(m.rfind("ERR_BACKEND_UNAVAILABLE: backend 'metal': the GPU 'Apple Paravirtual device' (family Apple5) cannot run", 0) == 0 &&
                m.find("GPU family Apple7") != std::string::npos && m.find("GPU family Metal3") != std::string::npos,
            "Apple5 paravirtual device -> ERR_BACKEND_UNAVAILABLE naming it and what it lacks", m);
  }
  {
    const std::string m = refusal(nullptr, "16384");
    verdict(m.find("ERR_BACKEND_UNAVAILABLE: ") == 0 && m.find("(family Apple7)") != std::string::npos &&
                m.find("lacks " + std::to_string(mtl::kernels_threadgroup_bytes()) + " bytes of threadgroup memory (it has 16384)") != std::string::npos,
            "Apple7 with 16 KiB of threadgroup memory -> ERR_BACKEND_UNAVAILABLE", m);
  }
  {
    mtl::GpuCaps caps;
    std::string why;
    const bool found = mtl::metal_gpu(&caps, &why);
    verdict(found && caps.apple7 && caps.metal3 && caps.apple_family == 7 && mtl::missing_capabilities(caps).empty() && refusal(nullptr, nullptr) == "no error",
            "Apple7 device: accepted, reported as family Apple7", found ? caps.name : why);
  }
  // The precompiled kernels. The fake's "metallib" is MSL text (fake_metal.mm): the embedded sources plus the
  // stamp kernel stand for the one binding.gyp builds from the same sources.
  const auto metallib_case = [&](const std::string& name, bool with_stamp, bool expect_loaded) {
    const std::string file = "/tmp/tessera-fakemetal-" + std::to_string(getpid()) + ".metallib";
    std::string text;
    for (int i = 0; i < mtl::gen::kSourceCount; i++) text += mtl::gen::kSources[i].text;
    text += std::string("\nkernel void ") + (with_stamp ? mtl::gen::kStampKernel : "tessera_sources_0000000000000000") + "() {}\n";
    FILE* f = std::fopen(file.c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    setenv("TESSERA_METALLIB", file.c_str(), 1);
    const int before = fake_metal_source_compiles();
    try {
      auto b = mtl::make_metal_backend(mtl::make_metal_executor(), "metal");
      const Case& c = cases[5];  // linear bf16 (matmul)
      const std::vector<float> a = run(*b, c), e = run(*emu, c);
      const bool same = a.size() == e.size() && std::memcmp(a.data(), e.data(), a.size() * 4) == 0;
      const int compiles = fake_metal_source_compiles() - before;
      verdict(same && (expect_loaded ? compiles == 0 : compiles > 0), name,
              (same ? "" : "output differs from metal-emulated; ") + std::to_string(compiles) + " source compile(s)");
    } catch (const std::exception& ex) {
      verdict(false, name, ex.what());
    }
    unsetenv("TESSERA_METALLIB");
    std::remove(file.c_str());
  };
  metallib_case("tessera.metallib of these sources: loaded, no source compile", true, true);
  metallib_case("tessera.metallib of other sources (stale stamp): ignored, sources compiled", false, false);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
