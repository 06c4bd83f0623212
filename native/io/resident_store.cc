#include "io/resident_store.h"

#include <vector>

#include "common/aligned.h"
#include "io/file_reader.h"

namespace tessera {
namespace {

class ResidentStore final : public WeightStore {
 public:
  ResidentStore(const TowerSpec& spec, backend::Backend& backend) : backend_(backend) {
    try {
      load(spec);
    } catch (...) {
      for (auto* b : buffers_) backend_.release(b);
      throw;
    }
  }
  void load(const TowerSpec& spec) {
    FileSet files(spec.files);
    for (const auto& stage : spec.stages) {
      StageLayout layout = stage_layout(stage);
      AlignedBuffer mem(layout.bytes ? layout.bytes : 1);
      for (const auto& run : layout.runs) {  // one pread per contiguous file range
        stats_.reads += read_run(files, run, mem.as<char>());
        stats_.bytes_read += run.length;
      }
      stats_.resident_bytes += layout.bytes;
      backend::Buffer* buf = backend_.wrap_host(mem.data(), mem.size());
      buffers_.push_back(buf);
      memory_.push_back(std::move(mem));
      views_.emplace_back();
      bind_stage(stage, buf, 0, views_.back());
    }
  }
  ~ResidentStore() override {
    for (auto* b : buffers_) backend_.release(b);
  }
  const char* residency() const override { return "resident"; }
  void pack_linear_weights(const std::vector<std::string>& roles) override {
    for (StageWeights& v : views_)
      for (const std::string& role : roles)
        if (const backend::Tensor* t = v.find(role)) {
          backend::Tensor packed = *t;
          if (backend_.pack_weight(packed)) {
            v.set(role, packed);
            ++stats_.packed;
          }
        }
  }
  const StageWeights& acquire(size_t stage) override { return views_.at(stage); }
  void release(size_t) override {}
  WeightStoreStats stats() const override { return stats_; }

 private:
  backend::Backend& backend_;
  std::vector<AlignedBuffer> memory_;
  std::vector<backend::Buffer*> buffers_;
  std::vector<StageWeights> views_;
  WeightStoreStats stats_;
};

}  // namespace

std::unique_ptr<WeightStore> make_resident_store(const TowerSpec& spec, backend::Backend& backend) {
  return std::make_unique<ResidentStore>(spec, backend);
}

}  // namespace tessera
