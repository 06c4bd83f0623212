// float -> bfloat (__bf16) conversion for the shim's `bfloat`. clang lowers a conversion to __bf16 to a call of
// __truncsfbf2, which libgcc only has from GCC 13 on (Debian 12 ships GCC 12): defined here, weak, so that a
// runtime library that has it wins. Round to nearest, ties to even, as Metal converts float to bfloat; a NaN
// stays a (quiet) NaN.
#include <cstdint>
#include <cstring>

extern "C" __attribute__((weak)) __bf16 __truncsfbf2(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t bits = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u) : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  __bf16 b;
  std::memcpy(&b, &bits, sizeof b);
  return b;
}
