// The GPU executor, implemented in device.mm (the only Objective-C++ file; macOS only, ARC). This header
// is plain C++ so the op layer and the addon never see Objective-C types. On other platforms
// make_metal_executor() throws ERR_BACKEND_UNAVAILABLE (device_unavailable.cc).
#pragma once
#include <memory>
#include <string>

#include "metal/capability.h"
#include "metal/dispatch.h"

namespace tessera::mtl {

// ERR_BACKEND_UNAVAILABLE when there is no Metal GPU, or one that lacks what the kernels need (naming it).
std::unique_ptr<Executor> make_metal_executor();
// The system's Metal GPU as device.mm sees it (tessera doctor): false, with *why, where there is none.
bool metal_gpu(GpuCaps* caps, std::string* why);

}  // namespace tessera::mtl
