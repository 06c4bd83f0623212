#include "metal/metal_backend.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "metal/device.h"
#include "metal/emu_executor.h"
#include "metal/ops.h"

namespace tessera::mtl {
namespace {

class MetalBackend final : public backend::Backend {
 public:
  MetalBackend(std::unique_ptr<Executor> ex, std::string name, Precision precision)
      : ex_(std::move(ex)), name_(std::move(name)),
        act_(precision == Precision::F16                               ? DType::F16
             : precision == Precision::Bf16 && ex_->supports_bfloat() ? DType::BF16
                                                                       : DType::F32) {}
  ~MetalBackend() override {
    try {
      flush();
      ex_->wait_all();
      if (counters_) ex_->release(counters_);
    } catch (...) {
    }
  }

  const char* name() const override { return name_.c_str(); }
  const char* precision() const override { return act_ == DType::F16 ? "f16" : act_ == DType::BF16 ? "bf16" : "f32"; }
  DType activation_dtype(backend::ActRange range) const override {
    return range == backend::ActRange::Bounded ? act_ : DType::F32;
  }

  backend::Buffer* alloc(size_t bytes) override { return ex_->alloc(bytes); }
  backend::Buffer* wrap_host(void* host, size_t bytes) override { return ex_->wrap(host, bytes); }
  void release(backend::Buffer* buf) override {
    if (buf) ex_->release(buf);
  }
  void upload(backend::Buffer* dst, size_t offset, const void* src, size_t bytes) override {
    detail::require(dst && (bytes == 0 || dst->host), "upload", "destination has no host memory");
    detail::require(offset <= dst->bytes && bytes <= dst->bytes - offset, "upload",
                    std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " pass the end of a " + std::to_string(dst->bytes) +
                        "-byte buffer");
    finish();  // recorded work may still read the old contents (shared memory, no staging copy)
    if (bytes) std::memcpy(static_cast<char*>(dst->host) + offset, src, bytes);
  }
  void download(void* dst, const backend::Tensor& src) override {
    detail::require_tensor(src, "download", "src");
    finish();
    if (src.dtype == DType::F16 || src.dtype == DType::BF16) {  // a half or bfloat activation: widened, as the contract says
      float* out = static_cast<float*>(dst);
      for (int64_t r = 0; r < src.rows; ++r) widen_to_f32(src.host_ptr<char>(r), src.dtype, out + size_t(r) * size_t(src.cols), size_t(src.cols));
      return;
    }
    const size_t row = size_t(src.cols) * dtype_size(src.dtype);
    for (int64_t r = 0; r < src.rows; ++r) std::memcpy(static_cast<char*>(dst) + size_t(r) * row, src.host_ptr<char>(r), row);
  }

  void linear(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& w, const backend::LinearArgs& a) override { rec([&] { encode_linear(*ex_, y, x, w, a); }); }
  void layer_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& g, const backend::Tensor& b, float eps) override {
    rec([&] { encode_layer_norm(*ex_, y, x, g, b, eps); });
  }
  void rms_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* w, int64_t group, float eps,
                const backend::Tensor* residual) override {
    rec([&] { encode_rms_norm(*ex_, y, x, w, group, eps, residual); });
  }
  void add(const backend::Tensor& y, const backend::Tensor& a, const backend::Tensor& b) override { rec([&] { encode_add(*ex_, y, a, b); }); }
  void affine(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* sub, const backend::Tensor* m, float scale,
              float shift) override {
    rec([&] { encode_affine(*ex_, y, x, sub, m, scale, shift); });
  }
  void rope(const backend::Tensor& x, const backend::Tensor& c, const backend::Tensor& s, int64_t heads, int64_t hd, int64_t sections,
            const backend::HeadNorm* norm) override {
    rec([&] { encode_rope(*ex_, x, c, s, heads, hd, sections, norm); });
  }
  void attention(const backend::Tensor& out, const backend::Tensor& q, const backend::Tensor& k, const backend::Tensor& v, int64_t heads, int64_t hd, float scale,
                 const std::vector<backend::Segment>& segments, backend::AttnProducts products) override {
    rec([&] { encode_attention(*ex_, out, q, k, v, heads, hd, scale, segments, products); });
  }
  void gather_sum(const backend::Tensor& y, const backend::Tensor& table, backend::Buffer* lookup, int64_t taps, bool accumulate) override {
    rec([&] { encode_gather_sum(*ex_, y, table, lookup, taps, accumulate); });
  }

  // The finite check without a wait: a count_nonfinite dispatch into the open batch, counting into the next
  // slot of counters_; the slots are read at the next wait (finish: download and every other wait end in it).
  void check_finite(const backend::Tensor& x, const std::string& stage) override {
    detail::require_act(x, "check_finite", "x");
    if (x.rows == 0 || x.cols == 0) return;
    if (pending_.size() == kCounterSlots) finish();  // every slot awaits its wait (never with today's towers)
    if (!counters_) counters_ = ex_->alloc(kCounterSlots * 8);
    const size_t slot = pending_.size();
    uint32_t* c = static_cast<uint32_t*>(counters_->host) + 2 * slot;
    c[0] = 0;
    c[1] = 0xFFFFFFFFu;
    rec([&] { encode_count_nonfinite(*ex_, x, counters_, slot * 8); });
    pending_.push_back({stage, x.cols});
  }

  // Shared memory: the scan runs on the host once the GPU is done (N x D, next to a block's GEMMs).
  int64_t count_nonfinite(const backend::Tensor& x, int64_t* first) override {
    detail::require_act(x, "count_nonfinite", "x");
    finish();
    int64_t n = 0;
    std::vector<float> row(size_t(x.cols));
    for (int64_t r = 0; r < x.rows; ++r) {
      widen_to_f32(x.host_ptr<char>(r), x.dtype, row.data(), row.size());
      for (int64_t c = 0; c < x.cols; ++c)
        if (!std::isfinite(row[size_t(c)])) {
          if (n == 0 && first) *first = r * x.cols + c;
          ++n;
        }
    }
    return n;
  }

  void submit(std::function<void()> on_complete) override {
    dirty_ = false;
    ex_->commit([this, cb = std::move(on_complete)](const std::string& err) {
      if (!err.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.empty()) error_ = err;
      }
      if (cb) cb();  // slots are released even after a failure; the error surfaces at the next wait
    });
  }
  void finish() override {
    flush();
    ex_->wait_all();
    std::string err;
    {
      std::lock_guard<std::mutex> lock(mu_);
      err.swap(error_);
    }
    if (!err.empty()) fail(Code::Gpu, name_ + ": " + err);
    report_nonfinite();
  }

 private:
  template <class F>
  void rec(F f) {
    f();
    dirty_ = true;
  }
  void flush() {
    if (dirty_) submit(nullptr);
  }
  // After a wait: the finite checks issued before it, in order; the first that counted anything fails.
  void report_nonfinite() {
    std::vector<PendingCheck> done;
    done.swap(pending_);
    for (size_t i = 0; i < done.size(); i++) {
      const uint32_t* c = static_cast<const uint32_t*>(counters_->host) + 2 * i;
      if (c[0]) backend::fail_nonfinite(done[i].stage, int64_t(c[0]), int64_t(c[1]), done[i].cols);
    }
  }

  struct PendingCheck {
    std::string stage;
    int64_t cols;
  };
  static constexpr size_t kCounterSlots = 1024;  // 8 KiB: far more stages than a tower has
  backend::Buffer* counters_ = nullptr;
  std::vector<PendingCheck> pending_;

  std::unique_ptr<Executor> ex_;
  std::string name_;
  DType act_;  // what a Bounded activation is stored in: F32, F16 or BF16 (activation_dtype)
  bool dirty_ = false;
  std::mutex mu_;
  std::string error_;
};

}  // namespace

std::unique_ptr<backend::Backend> make_metal_backend(std::unique_ptr<Executor> ex, const std::string& name, Precision precision) {
  return std::make_unique<MetalBackend>(std::move(ex), name, precision);
}

std::unique_ptr<backend::Backend> make_metal_backend(const std::string& name, Precision precision) {
  if (name == "metal-emulated") return make_metal_backend(make_emu_executor(EmuOptions::from_env()), name, precision);
  if (name == "metal") return make_metal_backend(make_metal_executor(), name, precision);
  fail(Code::BackendUnavailable, "unknown Metal backend '" + name + "'");
}

}  // namespace tessera::mtl
