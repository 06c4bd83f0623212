// The Metal backend: backend::Backend over an Executor. `metal` drives the GPU through device.mm (macOS);
// `metal-emulated` runs the same MSL kernels through the same op layer on the MSL emulator (Linux, when
// build/mslemu/libtessera_mslemu.so was built with clang >= 15). Ops are recorded into one batch per stage
// and run on submit(); download / count_nonfinite / upload wait for the work issued before them.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "metal/dispatch.h"

namespace tessera::mtl {

// What the activations are stored in between ops (docs/metal.md#half-precision): F32; F16, half activations
// and tiles; Bf16, the same design in bfloat (MSL 3.1), or f32 where the executor has no bfloat
// (Executor::supports_bfloat; precision() then says "f32").
enum class Precision { F32, F16, Bf16 };

// name: "metal" or "metal-emulated"; ERR_BACKEND_UNAVAILABLE (saying why) where it cannot run.
std::unique_ptr<backend::Backend> make_metal_backend(const std::string& name, Precision precision = Precision::F32);
// The backend over a given executor (tests: an EmuExecutor with chosen schedule and poison).
std::unique_ptr<backend::Backend> make_metal_backend(std::unique_ptr<Executor> ex, const std::string& name,
                                                     Precision precision = Precision::F32);

}  // namespace tessera::mtl
