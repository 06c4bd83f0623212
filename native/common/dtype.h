// Element types of weights and activations, and the one place their sizes and the
// f16/bf16 <-> f32 conversions (and Q8_0's dequantisation) are defined.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tessera {

// F32, F16 and BF16 are computed with. Q8_0 is a stored type only (ggml's block_q8_0: an f16 scale
// then 32 int8 per block of 32 elements along a row): the weight stores widen it to f32 as they read
// it (io/weight_store.h), so no kernel ever sees it.
enum class DType : uint8_t { F32, F16, BF16, Q8_0 };

constexpr size_t kQ8_0Block = 32;       // elements per block
constexpr size_t kQ8_0BlockBytes = 34;  // f16 scale + 32 int8

// Bytes of one element of a type computed with (f32, f16, bf16); Q8_0 has no per-element size:
// see dtype_bytes.
inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
inline bool dtype_quantised(DType t) { return t == DType::Q8_0; }
// The type a tensor stored as t is computed in: Q8_0 widens to f32, the rest stay as they are.
inline DType dtype_computed(DType t) { return t == DType::Q8_0 ? DType::F32 : t; }
// Bytes of n elements stored as t; false when n is not a whole number of t's blocks.
bool dtype_bytes(DType t, uint64_t n, uint64_t* bytes);
const char* dtype_name(DType t);           // "f32", "f16", "bf16", "q8_0"
bool parse_dtype(const std::string& s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN kept quiet: what torch's .to(bfloat16) does.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Element i of a t-typed array as bf16: bf16 as it is, f32 and f16 rounded (f32_to_bf16).
inline uint16_t bf16_at(const void* p, DType t, size_t i) {
  if (t == DType::BF16) return static_cast<const uint16_t*>(p)[i];
  if (t == DType::F16) return f32_to_bf16(f16_to_f32(static_cast<const uint16_t*>(p)[i]));
  return f32_to_bf16(static_cast<const float*>(p)[i]);
}

// Widens n elements of type t starting at src into dst (f32). For Q8_0, n is a whole number of
// blocks and each value is exactly ggml's dequantize_row_q8_0: the f16 scale widened to f32, times
// the int8 as f32, one f32 product.
void widen_to_f32(const void* src, DType t, float* dst, size_t n);
// Q8_0 widened in place: the n elements' blocks sit at the END of dst's 4n bytes, i.e. at
// (char*)dst + 4n - dtype_bytes(Q8_0, n), and become n floats from dst on. Block i's floats end at
// 128(i+1), never past the start of block i+1's bytes, so one pass front to back is safe (each
// block is copied out before its floats overwrite it).
void widen_q8_0_in_place(float* dst, size_t n);

}  // namespace tessera
