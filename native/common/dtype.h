// Element types of weights and activations, and the one place their sizes and the
// f16/bf16 <-> f32 conversions are defined.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tessera {

enum class DType : uint8_t { F32, F16, BF16 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t);           // "f32", "f16", "bf16"
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

// Widens n elements of type t starting at src into dst (f32).
void widen_to_f32(const void* src, DType t, float* dst, size_t n);

}  // namespace tessera
