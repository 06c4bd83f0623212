#include "common/dtype.h"

#include <cmath>

namespace tessera {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

bool dtype_bytes(DType t, uint64_t n, uint64_t* bytes) {
  if (dtype_quantised(t)) {
    if (n % kQ8_0Block) return false;
    *bytes = n / kQ8_0Block * kQ8_0BlockBytes;
    return true;
  }
  *bytes = n * dtype_size(t);
  return true;
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "f32") *out = DType::F32;
  else if (s == "f16") *out = DType::F16;
  else if (s == "bf16") *out = DType::BF16;
  else if (s == "q8_0") *out = DType::Q8_0;
  else return false;
  return true;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow (incl. values rounding up to inf)
  if (a < 0x38800000u) {                                  // subnormal or zero in f16
    float af;
    std::memcpy(&af, &a, 4);
    // af * 2^24 rounded to nearest even gives the subnormal mantissa
    float scaled = af * 16777216.0f;
    uint32_t m = uint32_t(std::nearbyint(scaled));
    return uint16_t(sign | m);
  }
  uint32_t e = ((a >> 23) - 127 + 15);
  uint32_t m = a & 0x7fffff;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

// One block_q8_0 (kQ8_0BlockBytes at b) into 32 floats.
static inline void widen_q8_0_block(const uint8_t* b, float* dst) {
  uint16_t h;
  std::memcpy(&h, b, 2);
  const float d = f16_to_f32(h);
  for (size_t j = 0; j < kQ8_0Block; ++j) dst[j] = float(int8_t(b[2 + j])) * d;
}

void widen_q8_0_in_place(float* dst, size_t n) {
  const size_t blocks = n / kQ8_0Block;
  const uint8_t* src = reinterpret_cast<const uint8_t*>(dst) + 4 * n - blocks * kQ8_0BlockBytes;
  uint8_t block[kQ8_0BlockBytes];
  for (size_t i = 0; i < blocks; ++i) {
    std::memcpy(block, src + i * kQ8_0BlockBytes, kQ8_0BlockBytes);
    widen_q8_0_block(block, dst + i * kQ8_0Block);
  }
}

void widen_to_f32(const void* src, DType t, float* dst, size_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::Q8_0: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n / kQ8_0Block; ++i) widen_q8_0_block(s + i * kQ8_0BlockBytes, dst + i * kQ8_0Block);
      return;
    }
  }
}

}  // namespace tessera
