#include "metal/emu_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/platform.h"
#include "metal/mslemu_api.h"

namespace tessera::mtl {
namespace {

struct Library {
  mslemu_run_fn run = nullptr;
  mslemu_kernel_fn kernel = nullptr;
  std::string error;  // why it could not be loaded
  std::string path;
};

// build/Release/tessera.node or build/native-tests/native_tests -> build/mslemu/libtessera_mslemu.so
std::string default_path() {
  const std::string self = platform::module_path(reinterpret_cast<const void*>(&default_path));
  if (self.empty()) return "build/mslemu/libtessera_mslemu.so";
  const size_t slash = self.find_last_of(platform::kDirSeparators);
  const std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
  return dir + "/../mslemu/libtessera_mslemu.so";
}

const Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("TESSERA_MSLEMU_LIB");
    lib.path = env && *env ? env : default_path();
    std::string load_error;
    void* h = platform::load_library(lib.path, &load_error);
    if (!h) {
      std::string reason;
      std::ifstream st(lib.path.substr(0, lib.path.find_last_of(platform::kDirSeparators) + 1) + "status.json");
      if (st) {
        std::stringstream ss;
        ss << st.rdbuf();
        const std::string s = ss.str();
        const size_t r = s.find("\"reason\": \"");
        if (r != std::string::npos) reason = s.substr(r + 11, s.find('"', r + 11) - r - 11);
      }
      lib.error = "backend 'metal-emulated' needs the MSL emulator library " + lib.path + ", which `node tools/mslemu/build.mjs` builds with clang >= 15 in a clone of the repository (a contributor tool: the package does not ship it)" +
                  (reason.empty() ? " (" + load_error + ")" : " (" + reason + ")");
      return;
    }
    auto abi = reinterpret_cast<mslemu_abi_fn>(platform::library_symbol(h, "mslemu_abi"));
    lib.run = reinterpret_cast<mslemu_run_fn>(platform::library_symbol(h, "mslemu_run"));
    lib.kernel = reinterpret_cast<mslemu_kernel_fn>(platform::library_symbol(h, "mslemu_kernel"));
    if (!abi || !lib.run || !lib.kernel || abi() != TESSERA_MSLEMU_ABI) {
      lib.error = "the MSL emulator library " + lib.path + " is from another version of tessera: rebuild it with `node tools/mslemu/build.mjs`";
      lib.run = nullptr;
    }
  });
  return lib;
}

// Scratch is allocated at its exact size (not rounded to pages): under the sanitizer run (ASan runtime
// preloaded, emulator library built with -fsanitize=address) a kernel reading one element past a buffer
// hits the allocator's redzone.
struct EmuBuffer : backend::Buffer {
  void* owned = nullptr;  // null when wrapping host memory
  ~EmuBuffer() override { platform::aligned_free(owned); }
};

class EmuExecutor final : public Executor {
 public:
  explicit EmuExecutor(const EmuOptions& o) : opt_(o), lib_(library()) {
    if (!lib_.run) fail(Code::BackendUnavailable, lib_.error);
    lim_.max_buffer = uint64_t(1) << 40;
  }
  ~EmuExecutor() override {
    for (backend::Buffer* b : live_) delete b;
  }
  const char* name() const override { return "mslemu"; }
  bool supports_bfloat() const override { return true; }  // the shim has MSL 3.1's bfloat
  const DeviceLimits& limits() const override { return lim_; }

  backend::Buffer* wrap(void* host, size_t bytes) override {
    auto* b = new EmuBuffer();
    b->host = host;
    b->bytes = bytes;
    live_.push_back(b);
    return b;
  }
  backend::Buffer* alloc(size_t bytes) override {
    auto* b = new EmuBuffer();
    b->owned = platform::aligned_malloc(std::max<size_t>(bytes, 1), 64);
    if (!b->owned) {
      delete b;
      fail(Code::OutOfMemory, "metal-emulated: could not allocate " + std::to_string(bytes) + " bytes");
    }
    std::memset(b->owned, opt_.poison, std::max<size_t>(bytes, 1));  // "uninitialised": poisoned
    b->host = b->owned;
    b->bytes = bytes;
    live_.push_back(b);
    return b;
  }
  void release(backend::Buffer* buf) override {
    for (size_t i = 0; i < live_.size(); i++)
      if (live_[i] == buf) {
        live_.erase(live_.begin() + long(i));
        delete buf;
        return;
      }
    fail(Code::Internal, "internal: release of a buffer this executor does not own");
  }
  uint32_t max_threads(const KernelInfo& k) override {
    MslemuKernel info{};
    if (!lib_.kernel(k.name, &info))
      fail(Code::Internal, std::string("internal: the MSL emulator library has no kernel ") + k.name + ": rebuild it with `node tools/mslemu/build.mjs`");
    return opt_.max_threads ? std::min(info.max_threads, opt_.max_threads) : info.max_threads;
  }
  void record(const Dispatch& d) override { batch_.push_back(d); }
  void commit(std::function<void(const std::string&)> done) override {
    std::vector<Dispatch> work;
    work.swap(batch_);
    if (!opt_.syncs_file.empty()) {
      std::ofstream f(opt_.syncs_file, std::ios::app);
      f << "commit";
      for (const Dispatch& d : work) f << ' ' << d.kernel->name;
      f << '\n';
    }
    std::string err;
    for (const Dispatch& d : work) {
      err = run(d);
      if (!err.empty()) break;
    }
    if (done) done(err);
  }
  void wait_all() override {  // commit runs synchronously: nothing to wait for, but the wait is counted
    if (!opt_.syncs_file.empty()) std::ofstream(opt_.syncs_file, std::ios::app) << "wait\n";
  }

  void set_options(const EmuOptions& o) { opt_ = o; }

 private:
  std::string run(const Dispatch& d) {
    std::vector<MslemuBuffer> bufs;
    for (const BufferBinding& b : d.buffers) {
      char* p = static_cast<char*>(b.buf->host) + b.offset;
      if (b.access == Access::Write) std::memset(p, opt_.poison, b.bytes);
      bufs.push_back({b.index, p, b.bytes});
    }
    for (const BytesBinding& b : d.bytes) bufs.push_back({b.index, const_cast<uint8_t*>(b.data), b.size});
    std::vector<MslemuTgMem> tg;
    for (const TgMemBinding& t : d.tgmem) tg.push_back({t.index, t.bytes});
    MslemuDispatch md{d.kernel->name, bufs.data(), uint32_t(bufs.size()), tg.data(), uint32_t(tg.size()),
                      {d.groups.x, d.groups.y, d.groups.z}, {d.threads.x, d.threads.y, d.threads.z}};
    const bool counting = opt_.count || !opt_.counts_file.empty();
    // counts are exact with one worker (per-thread totals), and class counting runs one group per class
    MslemuOptions mo{opt_.schedule, opt_.seed, opt_.poison, counting ? 1 : opt_.workers, opt_.count_classes ? 1 : 0};
    MslemuCounts mc{};
    char err[4096] = {0};
    const int32_t rc = lib_.run(&md, &mo, counting ? &mc : nullptr, err, sizeof err);
    if (counting && rc == 0) keep_counts(d, mc);
    return rc == 0 ? std::string() : std::string(err);
  }

  void keep_counts(const Dispatch& d, const MslemuCounts& c) {
    DispatchCounts r{d.kernel->name, d.groups, d.threads, c.dev_read, c.dev_write, c.tg_read, c.tg_write,
                     c.mma, c.fma, c.alu, c.special, c.tg_barriers, c.simd_barriers};
    if (!opt_.counts_file.empty()) {
      std::ofstream f(opt_.counts_file, std::ios::app);
      f << "{\"kernel\":\"" << r.kernel << "\",\"groups\":[" << r.groups.x << "," << r.groups.y << "," << r.groups.z
        << "],\"threads\":[" << r.threads.x << "," << r.threads.y << "," << r.threads.z << "],\"dev_read\":" << r.dev_read
        << ",\"dev_write\":" << r.dev_write << ",\"tg_read\":" << r.tg_read << ",\"tg_write\":" << r.tg_write << ",\"mma\":" << r.mma
        << ",\"fma\":" << r.fma << ",\"alu\":" << r.alu << ",\"special\":" << r.special << ",\"tg_barriers\":" << r.tg_barriers
        << ",\"simd_barriers\":" << r.simd_barriers << "}\n";
    }
    if (opt_.count) counts_.push_back(std::move(r));
  }

 public:
  std::vector<DispatchCounts> take_counts() {
    std::vector<DispatchCounts> r;
    r.swap(counts_);
    return r;
  }

 private:
  std::vector<DispatchCounts> counts_;
  EmuOptions opt_;
  const Library& lib_;
  DeviceLimits lim_;
  std::vector<backend::Buffer*> live_;
  std::vector<Dispatch> batch_;
};

}  // namespace

EmuOptions EmuOptions::from_env() {
  EmuOptions o;
  if (const char* s = std::getenv("TESSERA_MSLEMU_SCHEDULE")) {
    const std::string v = s;
    if (v == "reverse") o.schedule = 1;
    else if (v.rfind("shuffled", 0) == 0) {
      o.schedule = 2;
      if (v.size() > 9) o.seed = std::strtoull(v.c_str() + 9, nullptr, 10);
    }
  }
  if (const char* s = std::getenv("TESSERA_MSLEMU_POISON")) o.poison = uint8_t(std::strtoul(s, nullptr, 16));
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  o.workers = int(std::min(hw, 2u));
  if (const char* s = std::getenv("TESSERA_MSLEMU_WORKERS")) o.workers = std::max(1, std::atoi(s));
  if (const char* s = std::getenv("TESSERA_MSLEMU_MAX_THREADS")) o.max_threads = uint32_t(std::max(0, std::atoi(s)));
  if (const char* s = std::getenv("TESSERA_MSLEMU_COUNTS")) o.counts_file = s;
  if (const char* s = std::getenv("TESSERA_MSLEMU_COUNT_CLASSES")) o.count_classes = std::atoi(s) != 0;
  if (const char* s = std::getenv("TESSERA_MSLEMU_SYNCS")) o.syncs_file = s;
  return o;
}

bool emulator_available(std::string* why) {
  const Library& lib = library();
  if (why) *why = lib.run ? lib.path : lib.error;
  return lib.run != nullptr;
}

std::unique_ptr<Executor> make_emu_executor(const EmuOptions& o) { return std::make_unique<EmuExecutor>(o); }

std::vector<DispatchCounts> take_emu_counts(Executor& ex) {
  auto* e = dynamic_cast<EmuExecutor*>(&ex);
  if (!e) fail(Code::Internal, "internal: take_emu_counts on a non-emulator executor");
  return e->take_counts();
}

void set_emu_options(Executor& ex, const EmuOptions& o) {
  auto* e = dynamic_cast<EmuExecutor*>(&ex);
  if (!e) fail(Code::Internal, "internal: set_emu_options on a non-emulator executor");
  e->set_options(o);
}

}  // namespace tessera::mtl
