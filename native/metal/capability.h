// What a GPU must offer to run tessera's kernels, and the check made when a `metal` tower opens
// (device.mm fills GpuCaps from the MTLDevice; this file is plain C++ so the rule is tested on Linux).
// The kernels need simdgroup matrices (GPU family Apple7: M1 and later; the "Apple Paravirtual device" of
// macOS VMs and GitHub's hosted runners is Apple5), Metal 3 (MTLGPUFamilyMetal3: the language version the
// libraries are compiled for), and the threadgroup memory their largest tiles take.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::mtl {

struct GpuCaps {
  std::string name;             // MTLDevice.name
  bool apple7 = false;          // supportsFamily:MTLGPUFamilyApple7
  bool metal3 = false;          // supportsFamily:MTLGPUFamilyMetal3
  int apple_family = 0;         // the highest MTLGPUFamilyAppleN supported (0: none), for reports
  uint64_t max_tg_memory = 0;   // maxThreadgroupMemoryLength
  uint64_t working_set = 0;     // recommendedMaxWorkingSetSize (0 where unknown)
};

// The most threadgroup memory any kernel takes, in bytes (from metal/shared/args.h's tile shapes: the flash
// attention kernels at the largest head size, with the small key tile the op layer falls back to).
uint32_t kernels_threadgroup_bytes();

// "" when the GPU can run the kernels, else what it lacks ("GPU family Apple7 (simdgroup matrices, M1 and
// later); ...").
std::string missing_capabilities(const GpuCaps& caps);

// The ERR_BACKEND_UNAVAILABLE message for a GPU that lacks something (names the GPU and what it lacks).
std::string unusable_gpu_message(const GpuCaps& caps, const std::string& missing);

}  // namespace tessera::mtl
