#include "common/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

#include "common/platform.h"

namespace tessera {

static CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(_M_X64)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const bool intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "Genu" "ineI" "ntel"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (unsigned long long)hi << 32 | lo;
  }
  bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  bool avx2 = b & (1u << 5);
  bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));  // F DQ BW VL
  const bool amx = (d & (1u << 22)) && (d & (1u << 24));  // AMX-BF16, AMX-TILE
  const bool xtile = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA enabled by the OS
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool avx512bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
  f.avx2_fma = ymm && avx2 && fma && f16c;
  f.avx512 = f.avx2_fma && zmm && avx512;
  f.avx512_bf16 = f.avx512 && avx512bf16;
  f.amx_bf16 = f.avx512_bf16 && amx && xtile;  // and the OS's grant, asked below unless TESSERA_SIMD holds it off
  f.bf16_unpack = intel;
#elif defined(__aarch64__)
  f.neon = true;
  f.neon_bf16 = platform::arm_bf16();
#endif
  // TESSERA_SIMD holds the ladder at a level (for tests of every path and for comparisons).
  if (const char* cap = std::getenv("TESSERA_SIMD")) {
    if (!std::strcmp(cap, "scalar")) f = CpuFeatures{};
    else if (!std::strcmp(cap, "avx2")) f.avx512 = f.avx512_bf16 = f.amx_bf16 = false;
    else if (!std::strcmp(cap, "avx512")) f.avx512_bf16 = f.amx_bf16 = false;
    else if (!std::strcmp(cap, "avx512-bf16")) f.amx_bf16 = false;
    else if (!std::strcmp(cap, "neon")) f.neon_bf16 = false;
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (f.amx_bf16) f.amx_bf16 = platform::request_amx_tile_data();
#endif
  if (const char* w = std::getenv("TESSERA_BF16_WIDEN")) {
    if (!std::strcmp(w, "unpack")) f.bf16_unpack = true;
    else if (!std::strcmp(w, "shift")) f.bf16_unpack = false;
  }
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* simd_level() {
  const auto& f = cpu_features();
  if (f.avx512) return "avx512";
  if (f.avx2_fma) return "avx2";
  if (f.neon) return "neon";
  return "scalar";
}

const char* bf16_level() {
  const auto& f = cpu_features();
  if (f.amx_bf16) return "amx";
  if (f.avx512_bf16) return "avx512-bf16";
  if (f.neon_bf16) return "neon-bf16";
  return "none";
}

const char* bf16_widening() { return cpu_features().bf16_unpack ? "unpack" : "shift"; }

}  // namespace tessera
