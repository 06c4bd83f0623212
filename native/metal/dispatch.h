// Backend-neutral dispatch descriptions (docs/metal-on-linux.md#the-op-layer): what the op layer produces and an
// Executor runs, either the real GPU (MetalExecutor, device.mm) or the MSL emulator (EmuExecutor). One
// Dispatch is one dispatchThreadgroups call: a kernel, its buffer / setBytes / threadgroup-memory
// bindings and its grid. validate() checks one against the kernel's declaration and the device limits.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "metal/kernel_info.h"

namespace tessera::mtl {

enum class Access : uint8_t { Read, Write, ReadWrite };
struct BufferBinding {
  uint8_t index;
  backend::Buffer* buf;
  uint64_t offset, bytes;  // the range the kernel may touch
  Access access;           // Write: every byte of the range is overwritten (the emulator pre-poisons it)
  uint32_t align;          // the element alignment the kernel's pointer type needs
};
struct BytesBinding {
  uint8_t index;
  uint16_t size;
  alignas(16) uint8_t data[256];
};
struct TgMemBinding {
  uint8_t index;
  uint32_t bytes;  // a multiple of 16
};
struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

struct Dispatch {
  const KernelInfo* kernel = nullptr;
  std::vector<BufferBinding> buffers;
  std::vector<BytesBinding> bytes;
  std::vector<TgMemBinding> tgmem;
  Dim3 groups, threads;

  explicit Dispatch(const std::string& name) : kernel(&kernel_info(name)) {}
  // A tensor's bytes from its first element to the end of its last row.
  void bind(uint8_t index, const backend::Tensor& t, Access access);
  void bind_raw(uint8_t index, backend::Buffer* buf, uint64_t offset, uint64_t bytes, Access access, uint32_t align);
  template <class T>
  void args(uint8_t index, const T& v) {
    static_assert(sizeof(T) <= sizeof(BytesBinding::data), "argument struct too large for setBytes staging");
    BytesBinding b{};
    b.index = index;
    b.size = uint16_t(sizeof(T));
    std::memcpy(b.data, &v, sizeof(T));
    bytes.push_back(b);
  }
  void tg(uint8_t index, uint32_t bytes_) { tgmem.push_back({index, bytes_}); }
};

struct DeviceLimits {
  uint32_t max_tg_memory = 32768, max_threads = 1024, simd_width = 32, max_bytes_arg = 4096;
  uint64_t page = 16384, max_buffer = uint64_t(1) << 32;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  virtual const DeviceLimits& limits() const = 0;
  virtual backend::Buffer* wrap(void* host, size_t bytes) = 0;  // no copy where the device allows it
  virtual backend::Buffer* alloc(size_t bytes) = 0;             // scratch, uninitialised, host-visible
  virtual void release(backend::Buffer* buf) = 0;
  virtual uint32_t max_threads(const KernelInfo& k) = 0;    // the pipeline's maxTotalThreadsPerThreadgroup
  virtual void record(const Dispatch& d) = 0;               // into the open batch (one per stage)
  // Ends the open batch and starts it; done(error) runs once it has finished ("" = success).
  virtual void commit(std::function<void(const std::string& error)> done) = 0;
  virtual void wait_all() = 0;                              // every committed batch has finished
  // Whether the kernels that take bfloat (MSL 3.1, KernelInfo::bfloat) can run: precision 'bf16' falls back
  // to f32 where not.
  virtual bool supports_bfloat() const = 0;
};

// "" when `d` is a valid dispatch of its kernel on a device with `lim`, else what is wrong.
std::string validate(const Dispatch& d, const DeviceLimits& lim, uint32_t pipeline_max_threads);

}  // namespace tessera::mtl
