#include "metal/capability.h"

#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {

uint32_t kernels_threadgroup_bytes() {
  return uint32_t(sizeof(float)) * kargs::attn_flash_tg_floats(kargs::kAttnMaxHeadDim, kargs::kAttnBKSmall);
}

std::string missing_capabilities(const GpuCaps& caps) {
  std::string out;
  const auto lack = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  if (!caps.apple7) lack("GPU family Apple7 (simdgroup matrices: M1 and later)");
  if (!caps.metal3) lack("GPU family Metal3 (the Metal 3 language the kernels are compiled for)");
  if (caps.max_tg_memory < kernels_threadgroup_bytes())
    lack(std::to_string(kernels_threadgroup_bytes()) + " bytes of threadgroup memory (it has " + std::to_string(caps.max_tg_memory) + ")");
  return out;
}

std::string unusable_gpu_message(const GpuCaps& caps, const std::string& missing) {
  std::string family = caps.apple_family ? "family Apple" + std::to_string(caps.apple_family) : "no Apple GPU family";
  return "backend 'metal': the GPU '" + caps.name + "' (" + family + ") cannot run tessera's kernels: it lacks " + missing +
         ". Use backend 'cpu' (backend 'auto' falls back to it)";
}

}  // namespace tessera::mtl
