// platform.h for Linux and macOS.
#if !defined(_WIN32)
#include "common/platform.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace tessera::platform {

Open open_read(const std::string& path, FileHandle* file, uint64_t* size) {
  // Non-blocking, so that a FIFO put in the file's place since TypeScript checked it cannot
  // hang the open; then only a regular file is read (a device would never end).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Open::Failed;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Open::NotRegular;
  }
  *file = fd;
  *size = uint64_t(st.st_size);
  return Open::Ok;
}

void close_file(FileHandle file) noexcept {
  if (file != kNoFile) ::close(int(file));
}

bool file_size(FileHandle file, uint64_t* size) {
  struct stat st;
  if (fstat(int(file), &st) != 0) return false;
  *size = uint64_t(st.st_size);
  return true;
}

int64_t read_at(FileHandle file, void* buf, size_t count, uint64_t offset) {
  for (;;) {
    ssize_t n = ::pread(int(file), buf, count, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    return int64_t(n);
  }
}

void* map_file(FileHandle file, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, int(file), 0);
  return p == MAP_FAILED ? nullptr : p;
}

void unmap_file(void* p, size_t bytes) noexcept { munmap(p, bytes); }

void advise_sequential(void* p, size_t bytes) noexcept { madvise(p, bytes, MADV_SEQUENTIAL); }
void advise_willneed(void* p, size_t bytes) noexcept { madvise(p, bytes, MADV_WILLNEED); }

size_t page_size() {
  static const size_t ps = [] {
    long v = sysconf(_SC_PAGESIZE);
    return v > 0 ? size_t(v) : size_t(4096);
  }();
  return ps;
}

namespace {
// Large buffers (weights, slots, activations) ask Linux for transparent huge pages: the GEMM
// streams weights through the TLB, and an encode's scratch is faulted in 2 MiB at a time instead of
// 4 KiB. Only the whole 2 MiB spans inside the buffer are advised, so a buffer's untouched tail
// never costs a huge page of RSS. Where THP is off (or not Linux) this changes nothing.
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = 2 * kHugePage;
inline size_t round_to(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

// Over-map by the alignment, then unmap the head and the tail around the aligned block, so that
// exactly [p, p + round_up(bytes, page)) stays mapped. Blocks from kHugeFrom on are 2 MiB aligned
// and advised for huge pages (see kHugePage).
void* map_memory(size_t bytes, size_t alignment) {
  const size_t ps = page_size();
  if (alignment < ps) alignment = ps;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugeFrom && alignment < kHugePage && kHugePage % alignment == 0) alignment = kHugePage;
#endif
  const size_t len = round_to(bytes, ps), extra = alignment > ps ? alignment : 0;
  void* raw = mmap(nullptr, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(raw);
  char* p = reinterpret_cast<char*>(round_to(reinterpret_cast<size_t>(base), alignment));
  if (p > base) munmap(base, size_t(p - base));
  if (base + len + extra > p + len) munmap(p + len, size_t(base + len + extra - (p + len)));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == kHugePage) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return p;
}

void unmap_memory(void* p, size_t bytes) noexcept { munmap(p, round_to(bytes, page_size())); }

void* aligned_malloc(size_t bytes, size_t alignment) {
  void* p = nullptr;
  return posix_memalign(&p, alignment, bytes) == 0 ? p : nullptr;
}

void aligned_free(void* p) noexcept { std::free(p); }

int physical_cores() {
  // Linux: count distinct (physical id, core id) pairs; hyperthreads share a core's FMA units,
  // so more threads than cores only adds contention.
  std::ifstream in("/proc/cpuinfo");
  if (!in) return 0;
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (line.rfind("physical id", 0) == 0) phys = std::atoi(line.c_str() + colon + 1);
    if (line.rfind("core id", 0) == 0) cores.insert({phys, std::atoi(line.c_str() + colon + 1)});
  }
  return int(cores.size());
}

bool request_amx_tile_data() {
#if defined(__x86_64__) && defined(__linux__)
  // AMX's tile data (8 KiB of state a thread) is off until the process asks Linux for it
  // (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), kernel 5.16+).
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool arm_bf16() {
#if defined(__aarch64__) && defined(__linux__)
  constexpr unsigned long kHwcap2Bf16 = 1ul << 14;
  return getauxval(AT_HWCAP2) & kHwcap2Bf16;
#else
  return false;
#endif
}

void* load_library(const std::string& path, std::string* why) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && why) *why = dlerror();
  return h;
}

void* library_symbol(void* library, const char* name) { return dlsym(library, name); }

std::string module_path(const void* address) {
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

std::string last_error() { return std::strerror(errno); }

}  // namespace tessera::platform
#endif
