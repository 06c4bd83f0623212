#include "models/vision_model.h"

#include <exception>

#include "common/aligned.h"
#include "common/error.h"
#include "models/gemma4_vision.h"
#include "models/qwen_vision.h"

namespace tessera {

std::unique_ptr<VisionModel> make_model(const TowerSpec& spec, backend::Backend& backend, WeightStore& store) {
  if (spec.family == "qwen3_5" || spec.family == "qwen3_vl") return make_qwen_vision(spec, backend, store);
  if (spec.family == "gemma4") return make_gemma4_vision(spec, backend, store);
  fail(Code::ModelFormat, "unknown tower family '" + spec.family + "'");
}

const char* row_kind_name(RowKind kind) { return kind == RowKind::Patch ? "patch" : "token"; }

Sizing VisionModel::sizing(int64_t patches) const {
  Sizing s;
  s.patch_width = patch_width();
  s.tokens = tokens(patches);
  s.width = out_width();
  s.scratch_bytes = scratch_bytes(patches);
  s.io_bytes = 4 * (uint64_t(patches) * uint64_t(s.patch_width) + uint64_t(s.tokens) * uint64_t(s.width));
  return s;
}

size_t ScratchPlan::add(int64_t rows, int64_t cols, DType dtype) { return add_bytes(uint64_t(rows) * uint64_t(cols) * dtype_size(dtype)); }

size_t ScratchPlan::add_bytes(uint64_t bytes) {
  offsets_.push_back(top_);
  top_ = round_up(top_ + bytes, 64);
  total_ = std::max(total_, top_);
  return offsets_.size() - 1;
}

int64_t chunk_rows(int64_t rows, int64_t max_chunk, int64_t multiple) {
  if (rows <= 0) return multiple;
  const int64_t chunks = (rows + max_chunk - 1) / max_chunk, even = (rows + chunks - 1) / chunks;
  return (even + multiple - 1) / multiple * multiple;
}

std::vector<int64_t> chunk_sizes(int64_t rows, int64_t chunk) {
  std::vector<int64_t> sizes;
  if (rows <= 0) return sizes;
  sizes.push_back(std::min(rows, chunk));
  if (rows > chunk && rows % chunk) sizes.push_back(rows % chunk);
  return sizes;
}

void walk_stages(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, const EncodeControl& ctl,
                 EncodeOutput& out, const StageOps& run, const StageSink& collect) {
  // The pass ends with the backend's wait: after the last stage (where a deferred finite check or a GPU error
  // surfaces), or here on the way out of an error (which is the one reported: a second is dropped).
  struct Pass {
    WeightStore& s;
    backend::Backend& b;
    ~Pass() {
      if (std::uncaught_exceptions()) try {
          b.finish();
        } catch (...) {
        }
      s.end_pass();
    }
  } pass{store, backend};
  store.begin_pass();
  const int total = int(spec.stages.size());
  for (int si = 0; si < total; ++si) {
    const StageSpec& stage = spec.stages[size_t(si)];
    if (ctl.cancelled && ctl.cancelled()) fail(Code::Aborted, "encode aborted before stage '" + stage.name + "'");
    const auto [result, kind] = run(stage, store.acquire(size_t(si)));
    WeightStore* s = &store;
    backend.submit([s, si] { s->release(size_t(si)); });
    if (ctl.check_finite) backend.check_finite(result, stage.name);
    if (ctl.keep_stages) out.stages.push_back(download_stage(backend, result, stage.name, kind));
    collect(stage, result);
    if (ctl.progress) ctl.progress(si + 1, total);
  }
  backend.finish();
}

StageOutput download_stage(backend::Backend& backend, const backend::Tensor& t, const std::string& name, RowKind kind) {
  StageOutput s;
  s.name = name;
  s.kind = kind;
  s.rows = t.rows;
  s.cols = t.cols;
  s.data.resize(t.elements());
  backend.download(s.data.data(), t);
  return s;
}

}  // namespace tessera
