#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera::gemma4 {

// Gemma 4 vision tower and projector (docs/models/gemma4-vision.md#forward-pass), for models/registry.cc.
std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk);

}  // namespace tessera::gemma4
