// Gemma 4's clippable linears (docs/models/gemma4-vision.md#clippable-linear): a linear <lin> has its
// weight at <lin>.linear.weight and optional input and output clamps, stored as four scalars
// (<lin>.input_min ... in HF checkpoints, 0-d; [1] in GGUF files) or packed as one 4-tuple
// <lin>.clamp (Ollama). These read them into backend::LinearArgs.
#pragma once
#include <string>

#include "backend/backend.h"
#include "io/weight_store.h"

namespace tessera::gemma4 {

inline std::string linear_weight(const std::string& lin) { return lin + ".linear.weight"; }

// A scalar as stored (any dtype), or `fallback` when the role is absent.
float scalar(const StageWeights& w, const std::string& role, float fallback);

// The clamps of <lin>: the packed `<lin>.clamp` when present and not all zero (all zero means "no
// clamp", Ollama's converter fill), else the four scalars, each ±inf when absent.
backend::LinearArgs clamps(const StageWeights& w, const std::string& lin);

}  // namespace tessera::gemma4
