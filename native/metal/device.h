// The GPU executor, implemented in device.mm (the only Objective-C++ file; macOS only, ARC). This header
// is plain C++ so the op layer and the addon never see Objective-C types. On other platforms
// make_metal_executor() throws ERR_BACKEND_UNAVAILABLE (device_unavailable.cc).
#pragma once
#include <memory>

#include "metal/dispatch.h"

namespace tessera::mtl {

std::unique_ptr<Executor> make_metal_executor();

}  // namespace tessera::mtl
