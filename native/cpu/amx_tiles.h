// The AMX tile configuration every AMX kernel uses (the bf16 GEMM in gemm_bf16_x86.cc, the bf16
// attention in attention_amx.cc): eight tiles of 16 rows of 64 bytes, i.e. a 16 x 16 f32
// accumulator, a 16 x 32 bf16 A tile, or a B tile of 16 rows of 16 bf16 pairs (VNNI form). One
// configuration for all, so the kernels interleave without reloading it. Included after a
// `#pragma GCC target(...amx-tile...)`.
#pragma once
#include <cstdint>

#include <immintrin.h>

#if defined(_WIN32)
#include "common/platform.h"
#endif

// GCC before 13 passes the tile loads' and stores' stride as a `long`, 32 bits on Windows (LLP64),
// so its asm names a 32-bit index register, which the assembler rejects: the same asm, 64-bit.
#if defined(_WIN32) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#undef _tile_loadd_internal
#undef _tile_stream_loadd_internal
#undef _tile_stored_internal
#define _tile_loadd_internal(dst, base, stride)                                            \
  __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #dst "|tileloadd\t%%tmm" #dst ", [%0+%1*1]}" \
                   ::"r"((const void*)(base)), "r"((long long)(stride)))
#define _tile_stream_loadd_internal(dst, base, stride)                                          \
  __asm__ volatile("{tileloaddt1\t(%0,%1,1), %%tmm" #dst "|tileloaddt1\t%%tmm" #dst ", [%0+%1*1]}" \
                   ::"r"((const void*)(base)), "r"((long long)(stride)))
#define _tile_stored_internal(src, base, stride)                                              \
  __asm__ volatile("{tilestored\t%%tmm" #src ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #src "}" \
                   ::"r"((void*)(base)), "r"((long long)(stride))                               \
                   : "memory")
#endif

namespace tessera::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration once per thread (it is thread state, kept across calls). Asked for by
// every micro-kernel call, so the flag is a real thread-local: MinGW's GCC emulates `thread_local`
// (a winpthreads key lookup each time), so Windows uses an OS TLS slot instead.
inline void configure_tiles() {
#if defined(_WIN32)
  static const unsigned slot = platform::tls_slot();
  if (platform::tls_flag(slot)) return;
#else
  static thread_local bool configured = false;
  if (configured) return;
#endif
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
#if defined(_WIN32)
  platform::set_tls_flag(slot);
#else
  configured = true;
#endif
}

}  // namespace tessera::cpu::amx
