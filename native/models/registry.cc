// The tower families the addon runs, by TowerSpec::family (the TypeScript registry,
// src/families/registry.ts, lists the same ids). Adding a family: its folder native/models/<family>/
// with a tower.h declaring its factory, and its lines here (docs/design.md#the-family-layer).
#include <string>

#include "common/error.h"
#include "models/gemma4/tower.h"
#include "models/qwen2/tower.h"
#include "models/qwen3/tower.h"
#include "models/vision_model.h"

namespace tessera {
namespace {

using Factory = std::unique_ptr<VisionModel> (*)(const TowerSpec&, backend::Backend&, WeightStore&, int64_t row_chunk);

struct Entry {
  const char* family;
  Factory make;
};

constexpr Entry kFamilies[] = {
    {"qwen3_5", qwen3::make_tower},
    {"qwen3_vl", qwen3::make_tower},
    {"gemma4", gemma4::make_tower},
    {"qwen2_vl", qwen2::make_tower},
    {"qwen2_5_vl", qwen2::make_tower},
};

}  // namespace

std::unique_ptr<VisionModel> make_model(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk) {
  for (const Entry& e : kFamilies)
    if (spec.family == e.family) return e.make(spec, backend, store, row_chunk);
  std::string known;
  for (const Entry& e : kFamilies) known += std::string(known.empty() ? "" : ", ") + e.family;
  fail(Code::ModelFormat, "unknown tower family '" + spec.family + "' (known: " + known + ")");
}

std::unique_ptr<VisionModel> make_model(const TowerSpec& spec, backend::Backend& backend, WeightStore& store) {
  return make_model(spec, backend, store, kRowChunk);
}

}  // namespace tessera
