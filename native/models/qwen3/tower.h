#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera::qwen3 {

// Qwen3.5 / Qwen3-VL vision tower (docs/models/qwen-vision.md#forward-pass), for models/registry.cc.
std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk);

}  // namespace tessera::qwen3
