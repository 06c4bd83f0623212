// The only Objective-C++ file (ARC): the Metal executor behind native/metal/device.h. Device and queue,
// refused (ERR_BACKEND_UNAVAILABLE) when the GPU lacks what the kernels need (metal/capability.h); the kernels
// from tessera.metallib beside the addon (compiled ahead of time by Apple's compiler: binding.gyp), when it
// is there and built from the same sources, else one MTLLibrary per embedded kernel source
// (build/metal/sources.gen.h, includes inlined) compiled at first use; pipelines cached by kernel name; zero-copy MTLBuffers over page-aligned host memory (slots,
// mappings, scratch); one command buffer per batch (a stage), whose completion handler reports errors and
// releases what the batch used (docs/design.md#residency: weight slots are handed back from there, never on a guess).
//
// Builds against the macOS 13, 14 and 15 SDKs (deployment target macOS 13.0, binding.gyp): API that only the
// macOS 15 SDK declares is behind compile-time guards (__MAC_OS_X_VERSION_MAX_ALLOWED), since @available
// decides at run time only and an older SDK's headers do not declare it at all.
//
// Also compiled on Linux: type-checked under -fobjc-arc against tools/fakemetal/stubs (npm run check:objc),
// and built a second time with -DTESSERA_FAKE_METAL_MRC (manual reference counting on the GNU runtime,
// where ARC cannot run) against tools/fakemetal/fake_metal.mm, which executes on the MSL emulator.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/aligned.h"
#include "common/error.h"
#include "metal/capability.h"
#include "metal/device.h"
#include "sources.gen.h"  // build/metal, written by scripts/msl-kernels.mjs

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

// GPU family AppleN, highest first, for reports (MTLGPUFamilyApple9 needs the macOS 14 SDK).
int apple_family(id<MTLDevice> dev) {
  const std::pair<MTLGPUFamily, int> families[] = {
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 140000
      {MTLGPUFamilyApple9, 9},
#endif
      {MTLGPUFamilyApple8, 8}, {MTLGPUFamilyApple7, 7}, {MTLGPUFamilyApple6, 6}, {MTLGPUFamilyApple5, 5},
      {MTLGPUFamilyApple4, 4}, {MTLGPUFamilyApple3, 3}, {MTLGPUFamilyApple2, 2}, {MTLGPUFamilyApple1, 1}};
  for (const auto& [f, n] : families)
    if ([dev supportsFamily:f]) return n;
  return 0;
}

GpuCaps capabilities(id<MTLDevice> dev) {
  GpuCaps c;
  const char* name = dev.name.UTF8String;
  c.name = name ? name : "?";
  c.apple7 = [dev supportsFamily:MTLGPUFamilyApple7];
  c.metal3 = [dev supportsFamily:MTLGPUFamilyMetal3];
  c.apple_family = apple_family(dev);
  c.max_tg_memory = uint64_t(dev.maxThreadgroupMemoryLength);
  c.working_set = uint64_t(dev.recommendedMaxWorkingSetSize);
  return c;
}

// Where tessera.metallib is looked for: $TESSERA_METALLIB ("off": never), else beside the binary that holds
// this file (the addon: build/Release/ or prebuilds/darwin-arm64/).
std::string metallib_path() {
  if (const char* e = std::getenv("TESSERA_METALLIB")) return std::string(e) == "off" ? "" : e;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&capabilities), &info) || !info.dli_fname) return "";
  std::string bin = info.dli_fname;
  const size_t slash = bin.rfind('/');
  return (slash == std::string::npos ? std::string(".") : bin.substr(0, slash)) + "/tessera.metallib";
}

std::string describe(NSError* e) {
  if (!e) return "no error description";
  const char* s = e.localizedDescription.UTF8String;
  return std::string(s ? s : "?") + " (code " + std::to_string(long(e.code)) + ")";
}

// Host memory seen by the GPU: the whole pages around `host`, as one MTLBuffer, or, past the device's
// maxBufferLength (a large mapped file), as views of `window` bytes every `window / 2` bytes, so that any
// binding up to window / 2 bytes lies entirely inside one view.
struct MetalBuffer : backend::Buffer {
  std::vector<id<MTLBuffer>> views;
  size_t base = 0;    // bytes from the first page to `host`
  size_t window = 0;  // bytes per view
  AlignedBuffer storage;  // scratch this executor allocated (empty for wrapped memory)
};

class MetalExecutor final : public Executor {
 public:
  MetalExecutor() {
    @autoreleasepool {
      dev_ = MTLCreateSystemDefaultDevice();
      if (!dev_) fail(Code::BackendUnavailable, "backend 'metal': no Metal device (MTLCreateSystemDefaultDevice returned nil)");
      const GpuCaps caps = capabilities(dev_);
      const std::string missing = missing_capabilities(caps);
      if (!missing.empty()) fail(Code::BackendUnavailable, unusable_gpu_message(caps, missing));
      queue_ = [dev_ newCommandQueue];
      if (!queue_) fail(Code::Gpu, "metal: newCommandQueue failed");
      lim_.max_tg_memory = uint32_t(dev_.maxThreadgroupMemoryLength);
      lim_.max_buffer = uint64_t(dev_.maxBufferLength);
      // The OS page size, read at run time (16 KiB on Apple silicon), and never less than 16 KiB: a view
      // aligned to 16 KiB is page-aligned on every Mac.
      lim_.page = std::max<uint64_t>(uint64_t(sysconf(_SC_PAGESIZE)), 16384);
      libs_.resize(size_t(gen::kSourceCount));
      libs31_.resize(size_t(gen::kSourceCount));
      load_metallib();
    }
  }
  ~MetalExecutor() override {
    try {
      wait_all();
    } catch (...) {
    }
    for (backend::Buffer* b : live_) destroy(static_cast<MetalBuffer*>(b));
  }

  const char* name() const override { return "metal"; }
  const DeviceLimits& limits() const override { return lim_; }

  backend::Buffer* wrap(void* host, size_t bytes) override {
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
  backend::Buffer* alloc(size_t bytes) override {
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
  void release(backend::Buffer* buf) override {
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
        const size_t at = mb->base + size_t(b.offset);
        size_t v = 0;
        if (mb->views.size() > 1) {
          v = std::min(at / (mb->window / 2), mb->views.size() - 1);  // the last view that starts at or before `at`
          if (at + b.bytes > v * (mb->window / 2) + mb->window)
            fail(Code::Gpu, "metal: a " + std::to_string(b.bytes) + "-byte binding of " + d.kernel->name + " does not fit one " +
                                std::to_string(mb->window) + "-byte view (maxBufferLength)");
        }
        [enc_ setBuffer:mb->views[v] offset:NSUInteger(at - v * (mb->window / 2)) atIndex:b.index];
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

  // Wraps the whole pages around [host, host + bytes) without a copy: one MTLBuffer, or overlapping views
  // when the region passes maxBufferLength.
  void attach(MetalBuffer* b, void* host, size_t bytes) {
    const uintptr_t page = uintptr_t(lim_.page);
    const uintptr_t start = reinterpret_cast<uintptr_t>(host) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(host) + std::max<size_t>(bytes, 1) + page - 1) / page * page;
    const size_t total = size_t(end - start);
    const size_t window = total <= lim_.max_buffer ? total : size_t(lim_.max_buffer / (2 * page) * (2 * page));
    if (window < total && window < 2 * page) fail(Code::Gpu, "metal: maxBufferLength " + std::to_string(lim_.max_buffer) + " is below two pages");
    b->base = size_t(reinterpret_cast<uintptr_t>(host) - start);
    b->window = window;
    for (size_t off = 0;; off += window / 2) {
      const size_t len = std::min(window, total - off);
      id<MTLBuffer> view = nil;
      @autoreleasepool {
        view = [dev_ newBufferWithBytesNoCopy:reinterpret_cast<void*>(start + off)
                                       length:NSUInteger(len)
                                      options:MTLResourceStorageModeShared
                                  deallocator:nil];
      }
      if (!view) {
        release_views(b);
        fail(Code::Gpu, "metal: newBufferWithBytesNoCopy failed for " + std::to_string(len) + " bytes");
      }
      b->views.push_back(view);
      if (off + len >= total) break;
    }
    b->host = host;
    b->bytes = bytes;
  }
  static void release_views(MetalBuffer* b) {
#ifdef TESSERA_FAKE_METAL_MRC
    for (id<MTLBuffer> v : b->views) [v release];
#endif
    b->views.clear();
  }
  static void destroy(MetalBuffer* b) {
    release_views(b);
    delete b;
  }

  // The precompiled kernels (binding.gyp: every metal/*.metal through `xcrun metal -std=metal3.0 -Werror`
  // and `metallib`), if the file is there and holds the stamp kernel of exactly the embedded sources (a
  // metallib from other sources is ignored: the embedded sources are what the op layer was built against).
  // Any failure leaves the source compile in charge.
  void load_metallib() {
    const std::string path = metallib_path();
    if (path.empty() || access(path.c_str(), R_OK) != 0) return;
    NSError* err = nil;
    id<MTLLibrary> lib = [dev_ newLibraryWithURL:[NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()]] error:&err];
    if (!lib) return;
    id<MTLFunction> stamp = [lib newFunctionWithName:[NSString stringWithUTF8String:gen::kStampKernel]];
    if (stamp) metallib_ = lib;
#ifdef TESSERA_FAKE_METAL_MRC
    [stamp release];
    if (!stamp) [lib release];
#endif
  }

  // MSL 3.1 (bfloat, precision 'bf16'): the macOS 14 SDK to build against and macOS 14 to run on. Every Apple
  // GPU tessera runs on (Apple 7 and later) has bfloat then.
  bool supports_bfloat() const override {
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 140000
    if (@available(macOS 14.0, *)) return true;
#endif
    return false;
  }

  // The library holding kernel k: the metallib (Metal 3.0: every kernel but the bfloat ones), else k's source
  // file compiled at first use, at 3.0, or at 3.1 for a kernel that takes bfloat (its own library: the file's
  // bfloat kernels exist only at 3.1, `#if defined(__HAVE_BFLOAT__)`).
  id<MTLLibrary> library(const KernelInfo& k) {
    if (metallib_ && !k.bfloat) return metallib_;
    int src = -1;
    for (int i = 0; i < gen::kSourceCount; i++)
      if (std::string(gen::kSources[i].file) == k.file) src = i;
    if (src < 0) fail(Code::Internal, std::string("internal: no embedded source ") + k.file);
    std::vector<id<MTLLibrary>>& libs = k.bfloat ? libs31_ : libs_;
    if (!libs[size_t(src)]) {
      MTLCompileOptions* opts = [MTLCompileOptions new];
      // Fast math, as the offline compiler's default for the metallib: the kernels are written for it
      // (no infinities or NaNs as values: metal/kernel_common.h).
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
      if (@available(macOS 15.0, *)) opts.mathMode = MTLMathModeFast;
      else opts.fastMathEnabled = YES;
#else
      opts.fastMathEnabled = YES;
#endif
      opts.languageVersion = MTLLanguageVersion3_0;
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 140000
      if (k.bfloat) {
        if (@available(macOS 14.0, *)) opts.languageVersion = MTLLanguageVersion3_1;
      }
#endif
      NSError* err = nil;
      id<MTLLibrary> lib = [dev_ newLibraryWithSource:[NSString stringWithUTF8String:gen::kSources[src].text] options:opts error:&err];
#ifdef TESSERA_FAKE_METAL_MRC
      [opts release];
#endif
      if (!lib) fail(Code::Gpu, std::string("metal: compiling ") + k.file + " failed: " + describe(err));
      libs[size_t(src)] = lib;
    }
    return libs[size_t(src)];
  }

  // The kernel's cached pipeline.
  id<MTLComputePipelineState> pipeline(const KernelInfo& k) {
    auto it = pipes_.find(k.name);
    if (it != pipes_.end()) return it->second;
    @autoreleasepool {
      id<MTLFunction> fn = [library(k) newFunctionWithName:[NSString stringWithUTF8String:k.name]];
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
  id<MTLLibrary> metallib_ = nil;
  std::vector<id<MTLLibrary>> libs_, libs31_;  // per source file, compiled at 3.0 and at 3.1
  std::unordered_map<std::string, id<MTLComputePipelineState>> pipes_;
  id<MTLCommandBuffer> cb_ = nil;
  id<MTLComputeCommandEncoder> enc_ = nil;
  DeviceLimits lim_;
  std::vector<backend::Buffer*> live_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inflight_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_metal_executor() { return std::make_unique<MetalExecutor>(); }

bool metal_gpu(GpuCaps* caps, std::string* why) {
  @autoreleasepool {
    id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
    if (!dev) {
      *why = "no Metal device (MTLCreateSystemDefaultDevice returned nil)";
      return false;
    }
    *caps = capabilities(dev);
#ifdef TESSERA_FAKE_METAL_MRC
    [dev release];
#endif
    return true;
  }
}

}  // namespace tessera::mtl
