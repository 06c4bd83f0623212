// What the operating system provides, in one place: files (open, size, positional read, read-only
// mapping), memory (page size, anonymous mappings, aligned allocation), the processor's core count
// and tile-state grant, dynamic libraries, and the text of the last OS error. platform_posix.cc
// implements it for Linux and macOS, platform_win32.cc for Windows; nothing else in native/
// includes an OS header (docs/windows.md lists where Windows behaves differently).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::platform {

// An open file: a descriptor on POSIX, a HANDLE on Windows. Sizes and offsets are 64-bit
// everywhere (Windows' long and off_t are 32 bits).
using FileHandle = intptr_t;
constexpr FileHandle kNoFile = -1;

enum class Open { Ok, Failed, NotRegular };
// Opens `path` (UTF-8; Windows converts it to UTF-16) read-only, in binary, never blocking on a FIFO,
// and accepts only a regular file (NotRegular: a FIFO, device, socket or directory). Failed:
// last_error() says why. Other processes may still rename, replace or truncate the file.
Open open_read(const std::string& path, FileHandle* file, uint64_t* size);
void close_file(FileHandle file) noexcept;
// The file's current size; false on failure (last_error() says why).
bool file_size(FileHandle file, uint64_t* size);
// Reads up to `count` bytes at `offset` without moving a file position (pread; ReadFile with an
// OVERLAPPED offset): the bytes read, 0 at the end of the file, -1 on failure (last_error()).
// Interrupted reads are retried here.
int64_t read_at(FileHandle file, void* buf, size_t count, uint64_t offset);

// A read-only shared mapping of the file's first `bytes` bytes (from offset 0, so the mapping
// granularity never matters to callers): null on failure (last_error()). While it is mapped,
// Windows refuses to truncate or delete the file; POSIX allows both.
void* map_file(FileHandle file, size_t bytes);
void unmap_file(void* p, size_t bytes) noexcept;
// Advice only (a no-op where the OS has no such advice).
void advise_sequential(void* p, size_t bytes) noexcept;
void advise_willneed(void* p, size_t bytes) noexcept;

size_t page_size();  // the OS page size, read once at run time
// Fresh zeroed read-write memory of round_up(bytes, page) bytes at an address aligned to `alignment`
// (a power of two, at least the page size), straight from the OS; null when there is none.
// Large blocks are advised for transparent huge pages where Linux has them.
void* map_memory(size_t bytes, size_t alignment);
void unmap_memory(void* p, size_t bytes) noexcept;
// Heap memory aligned to `alignment` (posix_memalign; _aligned_malloc): null when there is none.
// Freed by aligned_free, never by free.
void* aligned_malloc(size_t bytes, size_t alignment);
void aligned_free(void* p) noexcept;

// Physical cores (hyperthreads of one core counted once); 0 when the OS does not say.
int physical_cores();

// Whether this process may use AMX tile data, asking the OS for it on the first call (Linux:
// arch_prctl(ARCH_REQ_XCOMP_PERM); Windows: EnableProcessOptionalXStateFeatures). x86-64 only.
bool request_amx_tile_data();

// arm64: whether the OS reports FEAT_BF16 (Linux: HWCAP2_BF16). Not detected on macOS yet
// (sysctl hw.optional.arm.FEAT_BF16), nor on Windows: false there, so precision 'bf16' runs f32.
bool arm_bf16();

// A dynamic library (dlopen; LoadLibraryW), or null with `why` set.
void* load_library(const std::string& path, std::string* why);
void* library_symbol(void* library, const char* name);
// The file of the module (shared object, DLL, executable) that holds `address`; "" when unknown.
std::string module_path(const void* address);
// The characters that end a directory in a path this OS gives.
#if defined(_WIN32)
constexpr char kDirSeparators[] = "/\\";
#else
constexpr char kDirSeparators[] = "/";
#endif

#if defined(_WIN32)
// A per-thread flag for hot paths, in an OS TLS slot (TlsGetValue reads the thread's own block):
// MinGW's GCC has only emulated thread-locals. tls_slot() allocates one for the process (with none
// left, the flag always reads false).
unsigned tls_slot();
bool tls_flag(unsigned slot);
void set_tls_flag(unsigned slot);
#endif

// The text of the last OS error of this thread: strerror(errno), or Windows' FormatMessageW text
// of GetLastError() with its number. Read it right after the failing call.
std::string last_error();

}  // namespace tessera::platform
