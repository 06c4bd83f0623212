#include "models/vision_model.h"

#include <exception>

#include "common/aligned.h"
#include "common/error.h"

namespace tessera {

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
                 EncodeOutput& out, const StageOps& ops) {
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
    const StageOp* op = nullptr;
    for (const auto& [kind, f] : ops.by_kind)
      if (kind == stage.kind) op = &f;
    if (!op) fail(Code::ModelFormat, "stage '" + stage.name + "' has a kind " + ops.tower + " does not know: " + stage.kind);
    const StageResult r = (*op)(stage, store.acquire(size_t(si)));
    WeightStore* s = &store;
    backend.submit([s, si] { s->release(size_t(si)); });
    if (ctl.check_finite) backend.check_finite(r.out, stage.name);
    if (ctl.keep_stages) out.stages.push_back(download_stage(backend, r.out, stage.name, r.kind, r.order));
    if (r.emit == Emit::Deepstack) out.deepstack.push_back(download_stage(backend, r.out, stage.name, r.kind, r.order).data);
    if (r.emit == Emit::Embeddings) {
      out.tokens = r.out.rows;
      out.width = r.out.cols;
      out.embeddings = download_stage(backend, r.out, stage.name, r.kind, r.order).data;
    }
    if (ctl.progress) ctl.progress(si + 1, total);
  }
  backend.finish();
  if (out.embeddings.empty()) fail(Code::ModelFormat, std::string("the tower spec has no final stage for ") + ops.tower);
}

StageOutput download_stage(backend::Backend& backend, const backend::Tensor& t, const std::string& name, RowKind kind,
                           const std::vector<int64_t>* order) {
  StageOutput s;
  s.name = name;
  s.kind = kind;
  s.rows = t.rows;
  s.cols = t.cols;
  s.data.resize(t.elements());
  backend.download(s.data.data(), t);
  if (order) {
    TESSERA_CHECK(int64_t(order->size()) == t.rows, "row order of stage '" + name + "' does not match its rows");
    HostFloats tower_order(s.data.begin(), s.data.end());
    const size_t cols = size_t(t.cols);
    for (size_t i = 0; i < order->size(); ++i)
      std::copy_n(tower_order.begin() + i * cols, cols, s.data.begin() + size_t((*order)[i]) * cols);
  }
  return s;
}

}  // namespace tessera
