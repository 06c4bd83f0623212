// CpuBackend: buffers are page-aligned host memory; every op runs as it is issued (submit() only
// reports completion), on a persistent ThreadPool, with the Kernels table of one Simd level.
#include "cpu/cpu_backend.h"

#include <cstring>
#include <algorithm>
#include <mutex>
#include <set>

#include "common/aligned.h"
#include "common/cpu_features.h"
#include "common/error.h"
#include "cpu/ops.h"

namespace tessera::cpu {

const char* simd_name(Simd level) {
  switch (level) {
    case Simd::Scalar: return "scalar";
    case Simd::Neon: return "neon";
    case Simd::NeonBf16: return "neon-bf16";
    case Simd::Avx2: return "avx2";
    case Simd::Avx512: return "avx512";
    case Simd::Avx512Bf16: return "avx512-bf16";
    case Simd::Amx: return "amx";
  }
  return "?";
}

static const Kernels* table(Simd level) {
  switch (level) {
    case Simd::Scalar: return scalar_kernels();
    case Simd::Neon: return neon_kernels();
    case Simd::NeonBf16: return neon_bf16_kernels();
    case Simd::Avx2: return avx2_kernels();
    case Simd::Avx512: return avx512_kernels();
    case Simd::Avx512Bf16: return avx512_bf16_kernels();
    case Simd::Amx: return amx_kernels();
  }
  return nullptr;
}

bool has_bf16(Simd level) {
  const Kernels* k = table(level);
  return k && k->bf16;
}

static bool runs(Simd level) {
  const CpuFeatures& f = cpu_features();
  if (!table(level)) return false;
  switch (level) {
    case Simd::Scalar: return true;
    case Simd::Neon: return f.neon;
    case Simd::NeonBf16: return f.neon_bf16;
    case Simd::Avx2: return f.avx2_fma;
    case Simd::Avx512: return f.avx512;
    case Simd::Avx512Bf16: return f.avx512_bf16;
    case Simd::Amx: return f.amx_bf16;
  }
  return false;
}

std::vector<Simd> supported_simd() {
  std::vector<Simd> out;
  for (Simd s : {Simd::Scalar, Simd::Neon, Simd::NeonBf16, Simd::Avx2, Simd::Avx512, Simd::Avx512Bf16, Simd::Amx})
    if (runs(s)) out.push_back(s);
  return out;
}

Simd best_simd() { return supported_simd().back(); }

const Kernels& kernels_for(Simd level) {
  if (!runs(level))
    fail(Code::InvalidArgument, std::string("SIMD level ") + simd_name(level) + " is not available on this machine");
  return *table(level);
}

namespace {

struct HostBuffer : backend::Buffer {
  AlignedBuffer storage;  // empty for wrapped host memory
};

class CpuBackend final : public backend::Backend {
 public:
  CpuBackend(int threads, const Kernels& k, Precision p)
      : pool_(threads), ws_(pool_.size()), ctx_{pool_, k, ws_, p == Precision::Bf16 && k.bf16 != nullptr} {}
  ~CpuBackend() override {
    for (backend::Buffer* b : live_) delete b;
  }

  const char* name() const override { return "cpu"; }
  const char* precision() const override { return ctx_.bf16 ? "bf16" : "f32"; }

  backend::Buffer* alloc(size_t bytes) override {
    auto* b = new HostBuffer();
    try {
      b->storage = AlignedBuffer(bytes);
    } catch (...) {
      delete b;
      throw;
    }
    b->host = b->storage.data();
    b->bytes = bytes;
    track(b);
    return b;
  }
  backend::Buffer* wrap_host(void* host, size_t bytes) override {
    auto* b = new HostBuffer();
    b->host = host;
    b->bytes = bytes;
    track(b);
    return b;
  }
  void release(backend::Buffer* buf) override {
    if (!buf) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!live_.erase(buf)) fail(Code::Internal, "internal: release of a buffer this backend does not own");
    }
    delete buf;
  }
  void upload(backend::Buffer* dst, size_t offset, const void* src, size_t bytes) override {
    require(dst && (bytes == 0 || dst->host), "upload", "destination has no host memory");
    require(offset <= dst->bytes && bytes <= dst->bytes - offset, "upload",
            std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " pass the end of a " +
                std::to_string(dst->bytes) + "-byte buffer");
    if (bytes) std::memcpy(static_cast<char*>(dst->host) + offset, src, bytes);
  }
  void download(void* dst, const backend::Tensor& src) override {
    require_tensor(src, "download", "src");
    const size_t row = size_t(src.cols) * dtype_size(src.dtype);
    for (int64_t r = 0; r < src.rows; ++r)
      std::memcpy(static_cast<char*>(dst) + size_t(r) * row, src.host_ptr<char>(r), row);
  }

  void linear(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& w, const backend::LinearArgs& a) override {
    cpu::linear(ctx_, y, x, w, a);
  }
  bool pack_weight(backend::Tensor& w) override { return cpu::pack_weight(ctx_, w); }
  void layer_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& g, const backend::Tensor& b,
                  float eps) override {
    cpu::layer_norm(ctx_, y, x, g, b, eps);
  }
  void rms_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* w, int64_t group, float eps,
                const backend::Tensor* residual) override {
    cpu::rms_norm(ctx_, y, x, w, group, eps, residual);
  }
  void add(const backend::Tensor& y, const backend::Tensor& a, const backend::Tensor& b) override { cpu::add(ctx_, y, a, b); }
  void affine(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* sub, const backend::Tensor* m, float scale,
              float shift) override {
    cpu::affine(ctx_, y, x, sub, m, scale, shift);
  }
  void rope(const backend::Tensor& x, const backend::Tensor& cos, const backend::Tensor& sin, int64_t heads, int64_t head_dim,
            int64_t sections, const backend::HeadNorm* norm) override {
    cpu::rope(ctx_, x, cos, sin, heads, head_dim, sections, norm);
  }
  int64_t attention_query_block(backend::AttnProducts products) const override {
    return attention_kernel(ctx_, products).query_block;
  }
  void attention(const backend::Tensor& out, const backend::Tensor& q, const backend::Tensor& k, const backend::Tensor& v,
                 int64_t heads, int64_t head_dim, float scale, const std::vector<backend::Segment>& segs,
                 backend::AttnProducts products) override {
    cpu::attention(ctx_, out, q, k, v, heads, head_dim, scale, segs, products);
  }
  void gather_sum(const backend::Tensor& y, const backend::Tensor& table, backend::Buffer* lookup, int64_t taps,
                  bool accumulate) override {
    require(lookup && lookup->host, "gather_sum", "lookup buffer has no host memory");
    cpu::gather_sum(ctx_, y, table, lookup->host, lookup->bytes, taps, accumulate);
  }
  int64_t count_nonfinite(const backend::Tensor& x, int64_t* first) override { return cpu::count_nonfinite(ctx_, x, first); }

  uint64_t workspace_bytes(const backend::Workload& w) const override { return predict_workspace(w); }
  uint64_t predict_workspace(const Workload& w) const {
    const int T = pool_.size();
    size_t shared = 0, pack_a = 0, accum = 0;
    int gemm_slots = 0;
    for (const LinearShape& l : w.linears) {
      LinearScratch s = linear_scratch(ctx_, T, l.rows, l.in, l.out);
      if (!s.tasks) continue;
      shared = std::max(shared, s.shared_floats);
      pack_a = std::max(pack_a, s.pack_a_floats);
      accum = std::max(accum, s.accum_floats);
      gemm_slots = std::max(gemm_slots, s.tasks);
    }
    uint64_t bytes = shared ? Workspace::bytes_for(shared) : 0;
    if (gemm_slots) bytes += uint64_t(gemm_slots) * (Workspace::bytes_for(pack_a) + Workspace::bytes_for(accum));
    if (w.max_segment > 0 && w.head_dim > 0) {  // up to one attention task per thread, of either kernel
      auto scratch = [&](backend::AttnProducts p) { return attention_kernel(ctx_, p).scratch(w.max_segment, w.head_dim); };
      bytes += uint64_t(T) * Workspace::bytes_for(
                                 std::max(scratch(backend::AttnProducts::Bf16), scratch(backend::AttnProducts::F32)));
    }
    return bytes;
  }
  uint64_t held_workspace() const { return ws_.held_bytes(); }

  // Ops ran as they were issued: the stage is complete when submit() is called.
  void submit(std::function<void()> on_complete) override {
    if (on_complete) on_complete();
  }
  void finish() override {}

 private:
  void track(backend::Buffer* b) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(b);
  }

  ThreadPool pool_;
  Workspace ws_;
  Context ctx_;
  std::mutex mu_;
  std::set<backend::Buffer*> live_;
};

}  // namespace

std::unique_ptr<backend::Backend> make_cpu_backend(int threads, Simd level, Precision precision) {
  return std::make_unique<CpuBackend>(threads, kernels_for(level), precision);
}

std::unique_ptr<backend::Backend> make_cpu_backend_avx2(int threads, bool bf16_unpack) {
  kernels_for(Simd::Avx2);  // ERR_INVALID_ARGUMENT where AVX2 does not run
  return std::make_unique<CpuBackend>(threads, *avx2_kernels(bf16_unpack), Precision::F32);
}

std::unique_ptr<backend::Backend> make_cpu_backend(int threads, Precision precision) {
  return make_cpu_backend(threads, best_simd(), precision);
}

static const CpuBackend& as_cpu(const backend::Backend& b) {
  const auto* c = dynamic_cast<const CpuBackend*>(&b);
  if (!c) fail(Code::InvalidArgument, std::string("held_workspace_bytes: backend '") + b.name() + "' is not the CPU backend");
  return *c;
}

uint64_t held_workspace_bytes(const backend::Backend& backend) { return as_cpu(backend).held_workspace(); }

}  // namespace tessera::cpu
