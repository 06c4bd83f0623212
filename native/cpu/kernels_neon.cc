// arm64 kernel table (NEON; always present on arm64).
#include "cpu/kernels.h"

namespace tessera::cpu {

const Kernels* neon_kernels() { return nullptr; }

}  // namespace tessera::cpu
