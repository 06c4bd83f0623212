// What the host knows about each MSL kernel, generated from metal/*.metal by scripts/msl-kernels.mjs
// (build/metal/kernels.gen.h): its buffer and threadgroup-memory parameters, which buffers it only reads,
// the size of each `constant T&` argument struct, and its declared thread limit. validate() checks every
// dispatch against it on every executor, so a binding mistake fails on Linux before it reaches a GPU.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::mtl {

enum class ParamKind : uint8_t { Buffer, TgMem };
struct ParamInfo {
  ParamKind kind;
  uint8_t index;
  bool readonly;   // declared const / constant
  uint16_t bytes;  // sizeof(T) of a `constant T&` parameter (bound with setBytes), else 0
};
struct KernelInfo {
  const char* name;
  const char* file;
  int line;
  uint32_t max_threads;  // [[max_total_threads_per_threadgroup]] or 1024
  uint16_t first_param, nparams;
  bool bfloat;  // takes bfloat (MSL 3.1): not in the Metal 3.0 metallib, compiled from source at 3.1
  const ParamInfo& param(int i) const;
};

// The kernel called `name`; throws ERR_INTERNAL naming it if metal/*.metal has no such kernel.
const KernelInfo& kernel_info(const std::string& name);
int kernel_count();
const KernelInfo& kernel_at(int i);

}  // namespace tessera::mtl
