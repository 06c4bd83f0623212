// Qwen3's learned position table, read per patch by bilinear taps (docs/models/qwen-vision.md#position-embedding):
// the taps of an encode's rows, prepared on the host before its first stage.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/vit/grid.h"

namespace tessera::qwen3 {

// Bytes of gather_sum's lookup for n rows: 4 int32 indices + 4 f32 weights per row.
constexpr uint64_t position_lookup_bytes(int64_t n) { return uint64_t(n) * 8 * 4; }

// The taps of each row into the side x side table (index block, then weight block) uploaded to `lookup`.
void upload_position_taps(backend::Backend& backend, const PixelInput& in, int64_t merge, int64_t side,
                          backend::Buffer* lookup);

}  // namespace tessera::qwen3
