// What test_models.cc lends the other table tests: a small Gemma 4 and a small Qwen3-VL tower encoded on any
// backend, for a backend test (test_metal_ops.cc) to check the memory plan with that backend's activation types.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace tessera::modeltest {

struct ScratchUse {
  uint64_t predicted = 0, allocated = 0;  // VisionModel::scratch_bytes, and the peak of what the encode allocated
};

// One encode of test_models.cc's Gemma 4 tower (f32 weights; a 12 x 9 patch grid) on `backend`, in
// `row_chunk`-row chunks.
ScratchUse gemma_scratch(std::unique_ptr<backend::Backend> backend, int64_t row_chunk);
// The same for test_models.cc's Qwen3-VL tower (f32 weights; one 8 x 12 patch image).
ScratchUse qwen_scratch(std::unique_ptr<backend::Backend> backend, int64_t row_chunk);

}  // namespace tessera::modeltest
