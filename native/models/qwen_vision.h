#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera {

// Qwen3.5 / Qwen3-VL vision tower (docs/models/qwen-vision.md#forward-pass). row_chunk: rows per chunk of the
// per-token work (kRowChunk; tests lower it to run many chunks on small inputs), rounded down to
// whole merge windows.
std::unique_ptr<VisionModel> make_qwen_vision(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                              int64_t row_chunk = kRowChunk);

}  // namespace tessera
