// The alignments the weights' layouts are built on: one definition for the native stores (the
// stream slots, a stage's runs in a slot) and for TypeScript's packer, which reads them from the
// addon (weightAlignment; src/pack/manifest.ts), so a packed file's stage is one aligned read.
#pragma once
#include <cstdint>

namespace tessera {

// A packed file's stages and every stream slot start on this boundary: Apple silicon's 16 KiB
// page, a multiple of every other OS page size, so Metal can wrap a slot or a mapped stage as is.
constexpr uint64_t kStageAlignment = 16384;
// A tensor inside a stage (in a packed file, or a run in a slot) starts on this boundary modulo
// its file offset: a cache line and the widest SIMD load.
constexpr uint64_t kTensorAlignment = 64;

}  // namespace tessera
