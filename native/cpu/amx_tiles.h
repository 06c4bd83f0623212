// The AMX tile configuration every AMX kernel uses (the bf16 GEMM in gemm_bf16_x86.cc, the bf16
// attention in attention_amx.cc): eight tiles of 16 rows of 64 bytes, i.e. a 16 x 16 f32
// accumulator, a 16 x 32 bf16 A tile, or a B tile of 16 rows of 16 bf16 pairs (VNNI form). One
// configuration for all, so the kernels interleave without reloading it. Included after a
// `#pragma GCC target(...amx-tile...)`.
#pragma once
#include <cstdint>

#include <immintrin.h>

namespace tessera::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration once per thread (it is thread state, kept across calls).
inline void configure_tiles() {
  static thread_local bool configured = false;
  if (configured) return;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  configured = true;
}

}  // namespace tessera::cpu::amx
