#pragma once
#include <memory>

#include "models/vision_model.h"

namespace tessera {

// Gemma 4 vision tower + projector (docs/models/gemma4-vision.md#forward-pass), from any of the three sources:
// src/spec/gemma4.ts states every layout difference in the TowerSpec.
// row_chunk: rows per chunk of the per-token work (kRowChunk; tests lower it).
std::unique_ptr<VisionModel> make_gemma4_vision(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                                int64_t row_chunk = kRowChunk);

}  // namespace tessera
