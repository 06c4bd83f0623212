#include "metal/kernel_info.h"

#include "common/error.h"
#include "kernels.gen.h"  // build/metal, written by scripts/msl-kernels.mjs at gyp configure time

namespace tessera::mtl {

const ParamInfo& KernelInfo::param(int i) const { return gen::kParams[first_param + i]; }

const KernelInfo& kernel_info(const std::string& name) {
  for (const KernelInfo& k : gen::kKernels)
    if (name == k.name) return k;
  fail(Code::Internal, "internal: no MSL kernel named '" + name + "' in metal/*.metal");
}

int kernel_count() { return gen::kKernelCount; }
const KernelInfo& kernel_at(int i) { return gen::kKernels[i]; }

}  // namespace tessera::mtl
