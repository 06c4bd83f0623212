#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera {

// Qwen3.5 / Qwen3-VL vision tower (specs/qwen-vision.md §3).
std::unique_ptr<VisionModel> make_qwen_vision(const TowerSpec& spec, gpu::Backend& backend, WeightStore& store);

}  // namespace tessera
