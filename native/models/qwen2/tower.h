#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera::qwen2 {

// Qwen2-VL / Qwen2.5-VL vision tower (docs/models/qwen2-vision.md#forward-pass), for models/registry.cc.
std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk);

}  // namespace tessera::qwen2
