// A fake Metal for Linux (docs/metal-on-linux.md#fake-metal): the Foundation/Metal stub interfaces implemented
// on the GNU (gcc) Objective-C runtime, executing dispatches on the MSL emulator (libtessera_mslemu.so, C API).
// device.mm is compiled a second time with manual reference counting (-fno-objc-arc -DTESSERA_FAKE_METAL_MRC:
// ARC cannot run on Debian's runtime) and linked with this file, so every line of device.mm that encodes,
// binds, wraps memory, commits and reports errors runs here. Objects leak where MRC code would rely on ARC;
// a test does not mind.
//
// Behaviour mirrored from Metal (each an error where Metal would fail or misbehave): encoder bindings
// persist across dispatches; setBytes over 4 KiB, threadgroup memory lengths not a multiple of 16,
// newBufferWithBytesNoCopy with a pointer or length not a multiple of 16 KiB, a library source with an
// unresolved #include, a function name not in the source. TESSERA_FAKE_METAL_FAIL=<kernel> makes a command
// buffer containing that kernel fail (the error path of device.mm).
//
// The device it pretends to be (device.mm's capability check): TESSERA_FAKE_METAL_GPU=apple7 (default: an
// "Apple M1", families Apple1-7 and Metal3) or apple5 (the "Apple Paravirtual device" of macOS VMs and
// GitHub's hosted runners: Apple1-5, no Metal3); TESSERA_FAKE_METAL_TG_MEMORY overrides
// maxThreadgroupMemoryLength. A "metallib" here (newLibraryWithURL:) is a text file of MSL sources whose
// kernels are looked up in the emulator library, like newLibraryWithSource:; fake_metal_source_compiles()
// counts newLibraryWithSource: calls, so a test sees which path device.mm took.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <Block.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "metal/mslemu_api.h"

extern "C" id class_createInstance(Class cls, size_t extra);
extern "C" id object_dispose(id obj);

// ------------------------------------------------------------------ NSObject and friends (MRC, side tables:
// the gcc ABI is fragile, so classes declared in a stub get no ivars here)
static std::vector<std::vector<id>*> g_pools;
static std::unordered_map<void*, long> g_rc;

@implementation NSObject
+ (instancetype)alloc {
  id o = class_createInstance(self, 0);
  g_rc[(void*)o] = 1;
  return o;
}
+ (instancetype)new {
  return [[self alloc] init];
}
- (instancetype)init {
  return self;
}
- (instancetype)retain {
  g_rc[(void*)self]++;
  return self;
}
- (oneway void)release {
  if (--g_rc[(void*)self] == 0) {
    g_rc.erase((void*)self);
    [self dealloc];
  }
}
- (instancetype)autorelease {
  if (!g_pools.empty()) g_pools.back()->push_back(self);
  return self;
}
- (NSUInteger)retainCount {
  return (NSUInteger)g_rc[(void*)self];
}
- (BOOL)isEqual:(id)o {
  return self == o;
}
- (void)dealloc {
  object_dispose(self);
}
@end

// @autoreleasepool lowers to this class under MRC on the gcc runtime.
@interface NSAutoreleasePool : NSObject {
  std::vector<id>* _objs;
}
- (void)drain;
@end
@implementation NSAutoreleasePool
- (instancetype)init {
  _objs = new std::vector<id>();
  g_pools.push_back(_objs);
  return self;
}
- (void)drain {
  g_pools.pop_back();
  for (id o : *_objs) [o release];
  delete _objs;
  [self release];
}
@end

@interface FakeString : NSString {
 @public
  std::string* _s;
}
@end
@implementation FakeString
- (const char*)UTF8String {
  return _s->c_str();
}
- (void)dealloc {
  delete _s;
  [super dealloc];
}
@end
@implementation NSString
+ (instancetype)stringWithUTF8String:(const char*)s {
  FakeString* r = [[FakeString alloc] init];
  r->_s = new std::string(s);
  return (NSString*)[r autorelease];
}
- (const char*)UTF8String {
  return "";
}
@end

static std::unordered_map<void*, std::string> g_url_paths;
@implementation NSURL
+ (NSURL*)fileURLWithPath:(NSString*)path {
  NSURL* u = [[NSURL alloc] init];
  g_url_paths[(void*)u] = path.UTF8String;
  return [u autorelease];
}
@end

@interface FakeError : NSError {
 @public
  NSInteger _code;
  NSString* _desc;
}
@end
@implementation FakeError
- (NSInteger)code {
  return _code;
}
- (NSString*)localizedDescription {
  return _desc;
}
@end
@implementation NSError
- (NSInteger)code {
  return 0;
}
- (NSString*)localizedDescription {
  return nil;
}
@end
static NSError* make_error(NSInteger c, const std::string& t) {
  FakeError* e = [FakeError new];
  e->_code = c;
  e->_desc = [[NSString stringWithUTF8String:t.c_str()] retain];
  return (NSError*)[e autorelease];
}

struct CompileOpts {
  BOOL fast = YES;
  MTLMathMode mode = MTLMathModeFast;
  MTLLanguageVersion version = MTLLanguageVersion3_0;
};
static std::unordered_map<void*, CompileOpts> g_opts;
@implementation MTLCompileOptions
- (BOOL)fastMathEnabled {
  return g_opts[(void*)self].fast;
}
- (void)setFastMathEnabled:(BOOL)v {
  g_opts[(void*)self].fast = v;
}
- (MTLMathMode)mathMode {
  return g_opts[(void*)self].mode;
}
- (void)setMathMode:(MTLMathMode)v {
  g_opts[(void*)self].mode = v;
}
- (MTLLanguageVersion)languageVersion {
  return g_opts[(void*)self].version;
}
- (void)setLanguageVersion:(MTLLanguageVersion)v {
  g_opts[(void*)self].version = v;
}
@end

// ------------------------------------------------------------------ the fake device
static constexpr uintptr_t kPage = 16384;  // Apple silicon's page: what newBufferWithBytesNoCopy needs there

@interface FakeBuffer : NSObject <MTLBuffer> {
 @public
  void* _ptr;
  NSUInteger _len;
  id<MTLDevice> _dev;
}
@end
@implementation FakeBuffer
- (void*)contents {
  return _ptr;
}
- (NSUInteger)length {
  return _len;
}
- (id<MTLDevice>)device {
  return _dev;
}
@end

@interface FakeFunction : NSObject <MTLFunction> {
 @public
  NSString* _name;
}
@end
@implementation FakeFunction
- (NSString*)name {
  return _name;
}
@end

@interface FakeLibrary : NSObject <MTLLibrary> {
 @public
  std::vector<std::string>* _names;
}
@end
@implementation FakeLibrary
- (id<MTLFunction>)newFunctionWithName:(NSString*)n {
  for (auto& s : *_names)
    if (s == n.UTF8String) {
      FakeFunction* f = [FakeFunction new];
      f->_name = [n retain];
      return f;
    }
  return nil;
}
@end

@interface FakePipeline : NSObject <MTLComputePipelineState> {
 @public
  std::string* _kernel;
  NSUInteger _max;
}
@end
@implementation FakePipeline
- (NSUInteger)maxTotalThreadsPerThreadgroup {
  return _max;
}
- (NSUInteger)threadExecutionWidth {
  return 32;
}
- (NSUInteger)staticThreadgroupMemoryLength {
  return 0;
}
@end

struct Binding {
  void* ptr;
  uint64_t len;
};
struct Recorded {
  std::string kernel;
  std::map<uint32_t, Binding> buffers;
  std::map<uint32_t, std::vector<unsigned char>> bytes;
  std::map<uint32_t, uint32_t> tg;
  uint32_t groups[3], threads[3];
};
struct Work {
  std::vector<Recorded> dispatches;
  std::string encode_error;  // the first misuse seen while encoding
};

@interface FakeEncoder : NSObject <MTLComputeCommandEncoder> {
 @public
  Work* _work;
  Recorded* _state;  // current bindings: persist across dispatches, as in Metal
  bool _ended;
}
@end
@implementation FakeEncoder
- (void)misuse:(const std::string&)m {
  if (_work->encode_error.empty()) _work->encode_error = m;
}
- (void)setComputePipelineState:(id<MTLComputePipelineState>)s {
  _state->kernel = *((FakePipeline*)s)->_kernel;
}
- (void)setBuffer:(id<MTLBuffer>)b offset:(NSUInteger)off atIndex:(NSUInteger)i {
  if (i > 30) return [self misuse:"setBuffer: index " + std::to_string(i) + " > 30"];
  FakeBuffer* fb = (FakeBuffer*)b;
  if (!fb) {
    _state->buffers.erase(uint32_t(i));
    return;
  }
  if (off > fb->_len) return [self misuse:"setBuffer: offset " + std::to_string(off) + " past the buffer's " + std::to_string(fb->_len) + " bytes"];
  _state->buffers[uint32_t(i)] = Binding{(char*)fb->_ptr + off, fb->_len - off};
  _state->bytes.erase(uint32_t(i));
}
- (void)setBytes:(const void*)p length:(NSUInteger)n atIndex:(NSUInteger)i {
  if (n > 4096) return [self misuse:"setBytes: " + std::to_string(n) + " bytes exceed Metal's 4 KiB limit"];
  _state->bytes[uint32_t(i)] = std::vector<unsigned char>((const unsigned char*)p, (const unsigned char*)p + n);
  _state->buffers.erase(uint32_t(i));
}
- (void)setThreadgroupMemoryLength:(NSUInteger)n atIndex:(NSUInteger)i {
  if (n % 16) return [self misuse:"setThreadgroupMemoryLength: " + std::to_string(n) + " is not a multiple of 16"];
  _state->tg[uint32_t(i)] = uint32_t(n);
}
- (void)dispatchThreadgroups:(MTLSize)g threadsPerThreadgroup:(MTLSize)t {
  if (_ended) return [self misuse:"dispatch after endEncoding"];
  if (_state->kernel.empty()) return [self misuse:"dispatch without a pipeline state"];
  Recorded r = *_state;
  r.groups[0] = uint32_t(g.width), r.groups[1] = uint32_t(g.height), r.groups[2] = uint32_t(g.depth);
  r.threads[0] = uint32_t(t.width), r.threads[1] = uint32_t(t.height), r.threads[2] = uint32_t(t.depth);
  _work->dispatches.push_back(std::move(r));
}
- (void)endEncoding {
  _ended = true;
}
@end

@interface FakeCommandBuffer : NSObject <MTLCommandBuffer> {
 @public
  Work* _work;
  std::vector<MTLCommandBufferHandler>* _handlers;
  MTLCommandBufferStatus _status;
  NSError* _error;
}
@end
@implementation FakeCommandBuffer
- (id<MTLComputeCommandEncoder>)computeCommandEncoder {
  FakeEncoder* e = [FakeEncoder new];
  e->_work = _work;
  e->_state = new Recorded();
  return (id<MTLComputeCommandEncoder>)[e autorelease];
}
- (void)addCompletedHandler:(MTLCommandBufferHandler)block {
  _handlers->push_back(Block_copy(block));
}
- (void)commit {
  _status = MTLCommandBufferStatusCommitted;
  std::string err = _work->encode_error;
  const char* inject = std::getenv("TESSERA_FAKE_METAL_FAIL");
  for (auto& r : _work->dispatches) {
    if (!err.empty()) break;
    if (inject && r.kernel == inject) {
      err = "injected failure in " + r.kernel + " (TESSERA_FAKE_METAL_FAIL)";
      break;
    }
    std::vector<MslemuBuffer> bufs;
    for (auto& b : r.buffers) bufs.push_back({b.first, b.second.ptr, b.second.len});
    for (auto& b : r.bytes) bufs.push_back({b.first, b.second.data(), b.second.size()});
    std::vector<MslemuTgMem> tg;
    for (auto& t : r.tg) tg.push_back({t.first, t.second});
    MslemuDispatch d{r.kernel.c_str(), bufs.data(), uint32_t(bufs.size()), tg.data(), uint32_t(tg.size()),
                     {r.groups[0], r.groups[1], r.groups[2]}, {r.threads[0], r.threads[1], r.threads[2]}};
    MslemuOptions o{0, 0, 0xFF, 1, 0};  // the schedule and poison EmuExecutor uses in the smoke comparison
    char buf[4096] = {0};
    if (mslemu_run(&d, &o, nullptr, buf, sizeof buf) != 0) err = buf;
  }
  if (!err.empty()) {
    _status = MTLCommandBufferStatusError;
    _error = [make_error(1, err) retain];
  } else {
    _status = MTLCommandBufferStatusCompleted;
  }
  for (auto& h : *_handlers) {
    h((id<MTLCommandBuffer>)self);
    Block_release(h);
  }
  _handlers->clear();
}
- (void)waitUntilCompleted {
}
- (MTLCommandBufferStatus)status {
  return _status;
}
- (NSError*)error {
  return _error;
}
@end

@interface FakeQueue : NSObject <MTLCommandQueue>
@end
@implementation FakeQueue
- (id<MTLCommandBuffer>)commandBuffer {
  FakeCommandBuffer* c = [FakeCommandBuffer new];
  c->_work = new Work();
  c->_handlers = new std::vector<MTLCommandBufferHandler>();
  c->_status = MTLCommandBufferStatusNotEnqueued;
  return (id<MTLCommandBuffer>)[c autorelease];
}
@end

static int g_source_compiles = 0;
extern "C" int fake_metal_source_compiles(void) { return g_source_compiles; }

static bool paravirtual() {
  const char* e = std::getenv("TESSERA_FAKE_METAL_GPU");
  return e && std::string(e) == "apple5";
}

// The kernels of an MSL text, as a library: each must be in the emulator library.
static id<MTLLibrary> fake_library(const std::string& s, NSError** error);

@interface FakeDevice : NSObject <MTLDevice>
@end
@implementation FakeDevice
- (NSString*)name {
  return [NSString stringWithUTF8String:paravirtual() ? "Apple Paravirtual device" : "Apple M1 (tessera fake Metal on the MSL emulator)"];
}
- (BOOL)supportsFamily:(MTLGPUFamily)f {
  const NSInteger top = paravirtual() ? MTLGPUFamilyApple5 : MTLGPUFamilyApple7;
  if (f >= MTLGPUFamilyApple1 && f <= MTLGPUFamilyApple9) return f <= top;
  if (f == MTLGPUFamilyMetal3) return !paravirtual();
  return f == MTLGPUFamilyMac2 || (f >= MTLGPUFamilyCommon1 && f <= MTLGPUFamilyCommon3);
}
- (NSUInteger)maxThreadgroupMemoryLength {
  const char* e = std::getenv("TESSERA_FAKE_METAL_TG_MEMORY");
  return e ? NSUInteger(std::strtoull(e, nullptr, 10)) : 32768;
}
- (uint64_t)recommendedMaxWorkingSetSize {
  return uint64_t(paravirtual() ? 4 : 11) << 30;
}
- (NSUInteger)maxBufferLength {  // TESSERA_FAKE_METAL_MAX_BUFFER: a small limit, to exercise device.mm's views
  const char* e = std::getenv("TESSERA_FAKE_METAL_MAX_BUFFER");
  return e ? NSUInteger(std::strtoull(e, nullptr, 10)) : NSUInteger(1) << 32;
}
- (BOOL)hasUnifiedMemory {
  return YES;
}
- (id<MTLCommandQueue>)newCommandQueue {
  return (id<MTLCommandQueue>)[FakeQueue new];
}
- (id<MTLBuffer>)newBufferWithLength:(NSUInteger)n options:(MTLResourceOptions)o {
  (void)o;
  FakeBuffer* b = [FakeBuffer new];
  b->_ptr = aligned_alloc(kPage, (n + kPage - 1) / kPage * kPage);
  std::memset(b->_ptr, 0, n);
  b->_len = n;
  b->_dev = self;
  return b;
}
- (id<MTLBuffer>)newBufferWithBytesNoCopy:(void*)p length:(NSUInteger)n options:(MTLResourceOptions)o deallocator:(void (^)(void*, NSUInteger))d {
  (void)o;
  (void)d;
  if ((uintptr_t(p) % kPage) || (n % kPage) || n == 0) {
    std::fprintf(stderr, "fake-metal: newBufferWithBytesNoCopy needs a 16 KiB-aligned pointer and length (got %p, %lu)\n", p, (unsigned long)n);
    return nil;
  }
  FakeBuffer* b = [FakeBuffer new];
  b->_ptr = p;
  b->_len = n;
  b->_dev = self;
  return b;
}
- (id<MTLLibrary>)newLibraryWithURL:(NSURL*)url error:(NSError**)error {
  const std::string path = g_url_paths[(void*)url];
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (error) *error = make_error(1, "cannot open " + path);
    return nil;
  }
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return fake_library(text, error);
}
- (id<MTLLibrary>)newLibraryWithSource:(NSString*)src options:(MTLCompileOptions*)opts error:(NSError**)error {
  (void)opts;
  g_source_compiles++;
  return fake_library(src.UTF8String, error);
}
- (id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)f error:(NSError**)error {
  (void)error;
  MslemuKernel k{};
  mslemu_kernel(f.name.UTF8String, &k);
  FakePipeline* p = [FakePipeline new];
  p->_kernel = new std::string(f.name.UTF8String);
  p->_max = k.max_threads;
  return p;
}
@end

static id<MTLLibrary> fake_library(const std::string& s, NSError** error) {
  std::string fail;
  if (std::regex_search(s, std::regex("#\\s*include\\s*\"")))
    fail = "unresolved #include \"...\": newLibraryWithSource cannot read files (inline the includes)";
  std::vector<std::string> names;
  std::regex re("kernel\\s+void\\s+(\\w+)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator() && fail.empty(); ++it) {
    names.push_back((*it)[1]);
    // the metallib's stamp kernel (scripts/msl-kernels.mjs) is empty and never dispatched
    if (names.back().rfind("tessera_sources_", 0) != 0 && !mslemu_kernel(names.back().c_str(), nullptr))
      fail = "kernel " + names.back() + " is not in the emulator library";
  }
  if (names.empty() && fail.empty()) fail = "no kernels in the source";
  if (!fail.empty()) {
    if (error) *error = make_error(2, fail);
    return nil;
  }
  FakeLibrary* l = [FakeLibrary new];
  l->_names = new std::vector<std::string>(names);
  return l;
}

extern "C" id<MTLDevice> MTLCreateSystemDefaultDevice(void) { return (id<MTLDevice>)[FakeDevice new]; }
