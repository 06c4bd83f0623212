#include <algorithm>
#include <string>

#include "metal/dispatch.h"

namespace tessera::mtl {

static uint64_t extent(const backend::Tensor& t) {
  if (t.rows <= 0 || t.cols <= 0) return 0;
  return (uint64_t(t.rows - 1) * uint64_t(t.ld) + uint64_t(t.cols)) * dtype_size(t.dtype);
}

void Dispatch::bind_raw(uint8_t index, backend::Buffer* buf, uint64_t offset, uint64_t n, Access access, uint32_t align) {
  buffers.push_back({index, buf, offset, n, access, align});
}

void Dispatch::bind(uint8_t index, const backend::Tensor& t, Access access) {
  // A strided output leaves bytes between its rows alone: it cannot be pre-poisoned as a whole.
  if (access == Access::Write && !t.contiguous()) access = Access::ReadWrite;
  bind_raw(index, t.buf, t.offset, extent(t), access, uint32_t(dtype_size(t.dtype)));
}

std::string validate(const Dispatch& d, const DeviceLimits& lim, uint32_t pipeline_max) {
  const KernelInfo& k = *d.kernel;
  const std::string who = std::string("dispatch of ") + k.name + " (" + k.file + ":" + std::to_string(k.line) + "): ";
  uint32_t tg_total = 0;
  for (int i = 0; i < k.nparams; i++) {
    const ParamInfo& p = k.param(i);
    const std::string what = p.kind == ParamKind::TgMem ? "[[threadgroup(" : "[[buffer(";
    int found = 0;
    if (p.kind == ParamKind::TgMem) {
      for (auto& t : d.tgmem)
        if (t.index == p.index) {
          found++;
          if (t.bytes == 0 || t.bytes % 16) return who + what + std::to_string(p.index) + ")]] length " + std::to_string(t.bytes) + " is not a positive multiple of 16";
          tg_total += t.bytes;
        }
    } else if (p.bytes) {
      for (auto& b : d.bytes)
        if (b.index == p.index) {
          found++;
          if (b.size != p.bytes) return who + what + std::to_string(p.index) + ")]] expects a " + std::to_string(p.bytes) + "-byte argument struct, got " + std::to_string(b.size);
          if (b.size > lim.max_bytes_arg) return who + "setBytes argument over " + std::to_string(lim.max_bytes_arg) + " bytes";
        }
      for (auto& b : d.buffers)
        if (b.index == p.index) return who + what + std::to_string(p.index) + ")]] is a constant argument struct, bound as a buffer";
    } else {
      for (auto& b : d.buffers)
        if (b.index == p.index) {
          found++;
          if (!b.buf) return who + what + std::to_string(p.index) + ")]] bound to no buffer";
          if (p.readonly && b.access != Access::Read) return who + what + std::to_string(p.index) + ")]] is read-only in the kernel but bound for writing";
          if (b.offset + b.bytes > b.buf->bytes) return who + what + std::to_string(p.index) + ")]] range ends at byte " + std::to_string(b.offset + b.bytes) + " of a " + std::to_string(b.buf->bytes) + "-byte buffer";
          if (b.align > 1 && b.offset % b.align) return who + what + std::to_string(p.index) + ")]] offset " + std::to_string(b.offset) + " is not aligned to its element size " + std::to_string(b.align);
        }
      for (auto& b : d.bytes)
        if (b.index == p.index) return who + what + std::to_string(p.index) + ")]] is a device buffer, bound with setBytes";
    }
    if (found != 1) return who + what + std::to_string(p.index) + ")]] bound " + std::to_string(found) + " times (must be exactly once)";
  }
  auto declared = [&](ParamKind kind, uint8_t index) {
    for (int i = 0; i < k.nparams; i++)
      if (k.param(i).kind == kind && k.param(i).index == index) return true;
    return false;
  };
  for (auto& b : d.buffers)
    if (!declared(ParamKind::Buffer, b.index)) return who + "buffer bound at index " + std::to_string(b.index) + ", which the kernel does not declare";
  for (auto& b : d.bytes)
    if (!declared(ParamKind::Buffer, b.index)) return who + "bytes bound at index " + std::to_string(b.index) + ", which the kernel does not declare";
  for (auto& t : d.tgmem)
    if (!declared(ParamKind::TgMem, t.index)) return who + "threadgroup memory set at index " + std::to_string(t.index) + ", which the kernel does not declare";
  if (tg_total > lim.max_tg_memory) return who + "threadgroup memory " + std::to_string(tg_total) + " bytes exceeds the device's " + std::to_string(lim.max_tg_memory);
  const uint64_t n = d.threads.count();
  const uint32_t cap = std::min({lim.max_threads, pipeline_max, k.max_threads});
  if (n == 0 || n > cap) return who + std::to_string(n) + " threads per threadgroup; the pipeline allows 1.." + std::to_string(cap);
  if (d.groups.count() == 0) return who + "empty grid";
  return "";
}

}  // namespace tessera::mtl
