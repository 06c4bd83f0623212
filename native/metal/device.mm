// The only Objective-C++ file (ARC): the Metal executor behind native/metal/device.h. Device and queue;
// one MTLLibrary per embedded kernel source (build/metal/sources.gen.h, includes inlined), compiled at
// first use; pipelines cached by kernel name; zero-copy MTLBuffers over page-aligned host memory (slots,
// mappings, scratch); one command buffer per batch (a stage), whose completion handler reports errors and
// releases what the batch used (DESIGN §5: weight slots are handed back from there, never on a guess).
//
// Also compiled on Linux: type-checked under -fobjc-arc against tools/fakemetal/stubs (npm run check:objc),
// and built a second time with -DTESSERA_FAKE_METAL_MRC (manual reference counting on the GNU runtime,
// where ARC cannot run) against tools/fakemetal/fake_metal.mm, which executes on the MSL emulator.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/aligned.h"
#include "common/error.h"
#include "metal/device.h"
#include "sources.gen.h"  // build/metal, written by tools/mslemu/prepass.mjs

#if !__has_feature(objc_arc) && !defined(TESSERA_FAKE_METAL_MRC)
#error "device.mm must be compiled with -fobjc-arc (binding.gyp: CLANG_ENABLE_OBJC_ARC)"
#endif

// Objects from non-owning methods (commandBuffer, computeCommandEncoder) must outlive the autorelease pool
// they came from: ARC's strong members retain them; the MRC build on the fake retains them explicitly.
#ifdef TESSERA_FAKE_METAL_MRC
#define TESSERA_KEEP(x) [(x) retain]
#else
#define TESSERA_KEEP(x) (x)
#endif

namespace tessera::mtl {
namespace {

std::string describe(NSError* e) {
  if (!e) return "no error description";
  const char* s = e.localizedDescription.UTF8String;
  return std::string(s ? s : "?") + " (code " + std::to_string(long(e.code)) + ")";
}

struct MetalBuffer : gpu::Buffer {
  id<MTLBuffer> mtl = nil;  // covers whole pages around `host`
  size_t base = 0;          // bytes from the MTLBuffer's start to `host`
  AlignedBuffer storage;    // scratch this executor allocated (empty for wrapped memory)
};

class MetalExecutor final : public Executor {
 public:
  MetalExecutor() {
    @autoreleasepool {
      dev_ = MTLCreateSystemDefaultDevice();
      if (!dev_) fail(Code::BackendUnavailable, "backend 'metal': no Metal device (MTLCreateSystemDefaultDevice returned nil)");
      queue_ = [dev_ newCommandQueue];
      if (!queue_) fail(Code::Gpu, "metal: newCommandQueue failed");
      lim_.max_tg_memory = uint32_t(dev_.maxThreadgroupMemoryLength);
      lim_.max_buffer = uint64_t(dev_.maxBufferLength);
      // The OS page size, read at run time (16 KiB on Apple silicon), and never less than 16 KiB: a view
      // aligned to 16 KiB is page-aligned on every Mac.
      lim_.page = std::max<uint64_t>(uint64_t(sysconf(_SC_PAGESIZE)), 16384);
      libs_.resize(size_t(gen::kSourceCount));
    }
  }
  ~MetalExecutor() override {
    try {
      wait_all();
    } catch (...) {
    }
    for (gpu::Buffer* b : live_) destroy(static_cast<MetalBuffer*>(b));
  }

  const char* name() const override { return "metal"; }
  const DeviceLimits& limits() const override { return lim_; }

  gpu::Buffer* wrap(void* host, size_t bytes) override {
    auto* b = new MetalBuffer();
    try {
      attach(b, host, bytes);
    } catch (...) {
      delete b;
      throw;
    }
    live_.push_back(b);
    return b;
  }
  gpu::Buffer* alloc(size_t bytes) override {
    auto* b = new MetalBuffer();
    try {
      b->storage = AlignedBuffer(round_up(std::max<size_t>(bytes, 1), size_t(lim_.page)), size_t(lim_.page));
      attach(b, b->storage.data(), bytes);
    } catch (...) {
      delete b;
      throw;
    }
    live_.push_back(b);
    return b;
  }
  void release(gpu::Buffer* buf) override {
    for (size_t i = 0; i < live_.size(); i++)
      if (live_[i] == buf) {
        live_.erase(live_.begin() + long(i));
        destroy(static_cast<MetalBuffer*>(buf));
        return;
      }
    fail(Code::Internal, "internal: release of a buffer the Metal executor does not own");
  }

  uint32_t max_threads(const KernelInfo& k) override { return uint32_t(pipeline(k).maxTotalThreadsPerThreadgroup); }

  void record(const Dispatch& d) override {
    @autoreleasepool {
      id<MTLComputePipelineState> pso = pipeline(*d.kernel);
      if (!cb_) {
        cb_ = TESSERA_KEEP([queue_ commandBuffer]);
        if (!cb_) fail(Code::Gpu, "metal: commandBuffer failed");
        enc_ = TESSERA_KEEP([cb_ computeCommandEncoder]);
        if (!enc_) fail(Code::Gpu, "metal: computeCommandEncoder failed");
      }
      [enc_ setComputePipelineState:pso];
      for (const BufferBinding& b : d.buffers) {
        auto* mb = static_cast<MetalBuffer*>(b.buf);
        [enc_ setBuffer:mb->mtl offset:NSUInteger(mb->base + b.offset) atIndex:b.index];
      }
      for (const BytesBinding& b : d.bytes) [enc_ setBytes:b.data length:b.size atIndex:b.index];
      for (const TgMemBinding& t : d.tgmem) [enc_ setThreadgroupMemoryLength:t.bytes atIndex:t.index];
      [enc_ dispatchThreadgroups:MTLSizeMake(d.groups.x, d.groups.y, d.groups.z)
           threadsPerThreadgroup:MTLSizeMake(d.threads.x, d.threads.y, d.threads.z)];
    }
  }

  void commit(std::function<void(const std::string&)> done) override {
    @autoreleasepool {
      if (!cb_) {  // nothing recorded: complete at once
        if (done) done("");
        return;
      }
      [enc_ endEncoding];
      {
        std::lock_guard<std::mutex> lock(mu_);
        inflight_++;
      }
      MetalExecutor* self = this;
      std::function<void(const std::string&)> cb_done = std::move(done);
      [cb_ addCompletedHandler:^(id<MTLCommandBuffer> buffer) {
        std::string err;
        if (buffer.status == MTLCommandBufferStatusError) err = "command buffer failed: " + describe(buffer.error);
        if (cb_done) cb_done(err);
        self->completed();
      }];
      [cb_ commit];
#ifdef TESSERA_FAKE_METAL_MRC
      [enc_ release];  // ARC releases these on the assignments below; MRC owns them until here
      [cb_ release];
#endif
      enc_ = nil;
      cb_ = nil;
    }
  }

  void wait_all() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return inflight_ == 0; });
  }

 private:
  void completed() {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_--;
    cv_.notify_all();
  }

  // Wraps the whole pages around [host, host + bytes) without a copy.
  void attach(MetalBuffer* b, void* host, size_t bytes) {
    const uintptr_t page = uintptr_t(lim_.page);
    const uintptr_t start = reinterpret_cast<uintptr_t>(host) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(host) + std::max<size_t>(bytes, 1) + page - 1) / page * page;
    if (end - start > lim_.max_buffer)
      fail(Code::Gpu, "metal: a " + std::to_string(end - start) + "-byte buffer exceeds the device's maxBufferLength " + std::to_string(lim_.max_buffer));
    @autoreleasepool {
      b->mtl = [dev_ newBufferWithBytesNoCopy:reinterpret_cast<void*>(start)
                                       length:NSUInteger(end - start)
                                      options:MTLResourceStorageModeShared
                                  deallocator:nil];
    }
    if (!b->mtl) fail(Code::Gpu, "metal: newBufferWithBytesNoCopy failed for " + std::to_string(end - start) + " bytes");
    b->base = size_t(reinterpret_cast<uintptr_t>(host) - start);
    b->host = host;
    b->bytes = bytes;
  }
  static void destroy(MetalBuffer* b) {
#ifdef TESSERA_FAKE_METAL_MRC
    [b->mtl release];
#endif
    b->mtl = nil;
    delete b;
  }

  // The kernel's library (its source file compiled at first use), then the cached pipeline.
  id<MTLComputePipelineState> pipeline(const KernelInfo& k) {
    auto it = pipes_.find(k.name);
    if (it != pipes_.end()) return it->second;
    int src = -1;
    for (int i = 0; i < gen::kSourceCount; i++)
      if (std::string(gen::kSources[i].file) == k.file) src = i;
    if (src < 0) fail(Code::Internal, std::string("internal: no embedded source ") + k.file);
    @autoreleasepool {
      if (!libs_[size_t(src)]) {
        MTLCompileOptions* opts = [MTLCompileOptions new];
        if (@available(macOS 15.0, *)) opts.mathMode = MTLMathModeFast;
        else opts.fastMathEnabled = YES;
        opts.languageVersion = MTLLanguageVersion3_0;
        NSError* err = nil;
        id<MTLLibrary> lib = [dev_ newLibraryWithSource:[NSString stringWithUTF8String:gen::kSources[src].text] options:opts error:&err];
#ifdef TESSERA_FAKE_METAL_MRC
        [opts release];
#endif
        if (!lib) fail(Code::Gpu, std::string("metal: compiling ") + k.file + " failed: " + describe(err));
        libs_[size_t(src)] = lib;
      }
      id<MTLFunction> fn = [libs_[size_t(src)] newFunctionWithName:[NSString stringWithUTF8String:k.name]];
      if (!fn) fail(Code::Gpu, std::string("metal: kernel ") + k.name + " not found in the library of " + k.file);
      NSError* err = nil;
      id<MTLComputePipelineState> pso = [dev_ newComputePipelineStateWithFunction:fn error:&err];
#ifdef TESSERA_FAKE_METAL_MRC
      [fn release];
#endif
      if (!pso) fail(Code::Gpu, std::string("metal: pipeline for ") + k.name + " failed: " + describe(err));
      if (pso.threadExecutionWidth != 32)
        fail(Code::Gpu, std::string("metal: ") + k.name + " runs with SIMD width " + std::to_string(pso.threadExecutionWidth) + "; the kernels assume 32");
      pipes_.emplace(k.name, pso);
      return pso;
    }
  }

  id<MTLDevice> dev_ = nil;
  id<MTLCommandQueue> queue_ = nil;
  std::vector<id<MTLLibrary>> libs_;
  std::unordered_map<std::string, id<MTLComputePipelineState>> pipes_;
  id<MTLCommandBuffer> cb_ = nil;
  id<MTLComputeCommandEncoder> enc_ = nil;
  DeviceLimits lim_;
  std::vector<gpu::Buffer*> live_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inflight_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_metal_executor() { return std::make_unique<MetalExecutor>(); }

}  // namespace tessera::mtl
