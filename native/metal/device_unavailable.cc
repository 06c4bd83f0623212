// make_metal_executor() where device.mm is not built (every platform but macOS): `metal` is unavailable.
#include "common/error.h"
#include "metal/device.h"

#if !defined(TESSERA_HAVE_METAL)
namespace tessera::mtl {

std::unique_ptr<Executor> make_metal_executor() {
  fail(Code::BackendUnavailable, "backend 'metal' needs macOS with a Metal GPU; on Linux use 'metal-emulated' (the same kernels on the MSL emulator)");
}

bool metal_gpu(GpuCaps*, std::string* why) {
  *why = "not built with Metal (macOS only)";
  return false;
}

}  // namespace tessera::mtl
#endif
