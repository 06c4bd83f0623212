// platform.h for Windows (x64): the W (UTF-16) calls throughout, so that any path Node hands over
// opens whatever its characters; handles in binary, 64-bit offsets.
#if defined(_WIN32)
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0A00  // Windows 10: PrefetchVirtualMemory, GetLogicalProcessorInformationEx
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/platform.h"

namespace tessera::platform {
namespace {

HANDLE handle(FileHandle f) { return reinterpret_cast<HANDLE>(f); }

// UTF-8 -> UTF-16. An absolute path past MAX_PATH gets the \\?\ prefix (which also turns off
// Win32's path rewriting, so its separators become backslashes first).
bool widen(const std::string& s, std::wstring* out) {
  out->clear();
  if (s.empty()) return true;
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s.data(), int(s.size()), nullptr, 0);
  if (n <= 0) return false;
  out->resize(size_t(n));
  MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s.data(), int(s.size()), out->data(), n);
  const bool drive_absolute = out->size() > 2 && (*out)[1] == L':' && ((*out)[2] == L'\\' || (*out)[2] == L'/');
  if (out->size() >= MAX_PATH && drive_absolute) {
    for (auto& c : *out)
      if (c == L'/') c = L'\\';
    out->insert(0, L"\\\\?\\");
  }
  return true;
}

std::string narrow(const wchar_t* w, size_t len) {
  int n = WideCharToMultiByte(CP_UTF8, 0, w, int(len), nullptr, 0, nullptr, nullptr);
  std::string s(size_t(n > 0 ? n : 0), '\0');
  if (n > 0) WideCharToMultiByte(CP_UTF8, 0, w, int(len), s.data(), n, nullptr, nullptr);
  return s;
}

std::string error_text(DWORD code) {
  wchar_t* buf = nullptr;
  DWORD len = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                             nullptr, code, MAKELANGID(LANG_NEUTRAL, SUBLANG_DEFAULT), reinterpret_cast<LPWSTR>(&buf), 0,
                             nullptr);
  std::string text = buf && len ? narrow(buf, len) : std::string();
  if (buf) LocalFree(buf);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '.'))
    text.pop_back();
  char num[32];
  std::snprintf(num, sizeof num, "Windows error %lu", static_cast<unsigned long>(code));
  return text.empty() ? std::string(num) : text + " (" + num + ")";
}

size_t round_to(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

Open open_read(const std::string& path, FileHandle* file, uint64_t* size) {
  std::wstring w;
  if (!widen(path, &w)) return Open::Failed;  // GetLastError: ERROR_NO_UNICODE_TRANSLATION
  // A directory cannot be opened without FILE_FLAG_BACKUP_SEMANTICS: name it as the not-a-file it is.
  const DWORD attrs = GetFileAttributesW(w.c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY)) return Open::NotRegular;
  // FILE_SHARE_DELETE | WRITE: other processes may rename, replace or truncate the file, as on POSIX.
  HANDLE h = CreateFileW(w.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                         OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return Open::Failed;
  LARGE_INTEGER sz;
  if (GetFileType(h) != FILE_TYPE_DISK || !GetFileSizeEx(h, &sz)) {
    CloseHandle(h);
    return Open::NotRegular;
  }
  *file = reinterpret_cast<FileHandle>(h);
  *size = uint64_t(sz.QuadPart);
  return Open::Ok;
}

void close_file(FileHandle file) noexcept {
  if (file != kNoFile) CloseHandle(handle(file));
}

bool file_size(FileHandle file, uint64_t* size) {
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(handle(file), &sz)) return false;
  *size = uint64_t(sz.QuadPart);
  return true;
}

int64_t read_at(FileHandle file, void* buf, size_t count, uint64_t offset) {
  // A synchronous handle with an OVERLAPPED offset reads at that offset (and only moves the handle's
  // own position, which nothing here uses): pread's semantics, and safe from several threads.
  OVERLAPPED ov{};
  ov.Offset = DWORD(offset & 0xffffffffu);
  ov.OffsetHigh = DWORD(offset >> 32);
  DWORD got = 0;
  const DWORD want = DWORD(count > 0x40000000u ? 0x40000000u : count);
  if (!ReadFile(handle(file), buf, want, &got, &ov)) return GetLastError() == ERROR_HANDLE_EOF ? 0 : -1;
  return int64_t(got);
}

void* map_file(FileHandle file, size_t bytes) {
  // The mapping object can go as soon as the view exists (the view holds the section). Mapping from
  // offset 0 keeps Windows' 64 KiB allocation granularity for view offsets out of the picture. The view
  // is the whole section (size 0): a read-only section is the file's size, and asking for the page-rounded
  // `bytes` past it is refused; the last page's tail reads as zeros, as with mmap.
  (void)bytes;
  HANDLE m = CreateFileMappingW(handle(file), nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (!m) return nullptr;
  void* p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
  const DWORD err = GetLastError();
  CloseHandle(m);
  if (!p) SetLastError(err);
  return p;
}

void unmap_file(void* p, size_t) noexcept { UnmapViewOfFile(p); }

void advise_sequential(void*, size_t) noexcept {}  // Windows has no madvise(MADV_SEQUENTIAL) for views

void advise_willneed(void* p, size_t bytes) noexcept {
  WIN32_MEMORY_RANGE_ENTRY r{p, bytes};
  PrefetchVirtualMemory(GetCurrentProcess(), 1, &r, 0);  // advice: failure is harmless
}

size_t page_size() {
  static const size_t ps = [] {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize ? size_t(si.dwPageSize) : size_t(4096);
  }();
  return ps;
}

namespace {
size_t granularity() {
  static const size_t g = [] {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwAllocationGranularity ? size_t(si.dwAllocationGranularity) : size_t(65536);
  }();
  return g;
}
}  // namespace

// VirtualAlloc's blocks start on the allocation granularity (64 KiB) and commit pages only as they
// are touched, as an anonymous mmap does. A larger alignment: reserve enough to find an aligned
// address, release, and allocate exactly there (another thread may take it first: try again).
void* map_memory(size_t bytes, size_t alignment) {
  const size_t len = round_to(bytes ? bytes : 1, page_size());
  if (alignment <= granularity()) return VirtualAlloc(nullptr, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  for (int attempt = 0; attempt < 16; ++attempt) {
    char* probe = static_cast<char*>(VirtualAlloc(nullptr, len + alignment, MEM_RESERVE, PAGE_NOACCESS));
    if (!probe) return nullptr;
    void* at = reinterpret_cast<void*>(round_to(reinterpret_cast<size_t>(probe), alignment));
    VirtualFree(probe, 0, MEM_RELEASE);
    if (void* p = VirtualAlloc(at, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE)) return p;
  }
  return nullptr;
}

void unmap_memory(void* p, size_t) noexcept { VirtualFree(p, 0, MEM_RELEASE); }

void* aligned_malloc(size_t bytes, size_t alignment) { return _aligned_malloc(bytes ? bytes : 1, alignment); }
void aligned_free(void* p) noexcept { _aligned_free(p); }

int physical_cores() {
  DWORD len = 0;
  GetLogicalProcessorInformationEx(RelationProcessorCore, nullptr, &len);
  if (GetLastError() != ERROR_INSUFFICIENT_BUFFER || !len) return 0;
  std::vector<char> buf(len);
  auto* info = reinterpret_cast<SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX*>(buf.data());
  if (!GetLogicalProcessorInformationEx(RelationProcessorCore, info, &len)) return 0;
  int cores = 0;
  for (DWORD at = 0; at < len;) {
    auto* e = reinterpret_cast<SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX*>(buf.data() + at);
    if (e->Relationship == RelationProcessorCore) ++cores;  // one entry a core, its SMT threads in its mask
    if (!e->Size) break;
    at += e->Size;
  }
  return cores;
}

bool request_amx_tile_data() {
  // Windows 11 / Server 2022 keep AMX tile data off per process until it is asked for, through
  // calls older kernel32s lack (looked up, so the addon still loads on Windows 10, which has no AMX
  // support: false there). Both tile components must also be among the OS's enabled features.
  constexpr DWORD64 kTileConfig = DWORD64(1) << 17, kTileData = DWORD64(1) << 18;
  HMODULE k32 = GetModuleHandleW(L"kernel32.dll");
  if (!k32) return false;
  using GetFeatures = DWORD64(WINAPI*)();
  using EnableFeatures = BOOL(WINAPI*)(DWORD64);
  auto enabled = reinterpret_cast<GetFeatures>(reinterpret_cast<void*>(GetProcAddress(k32, "GetEnabledXStateFeatures")));
  auto enable = reinterpret_cast<EnableFeatures>(
      reinterpret_cast<void*>(GetProcAddress(k32, "EnableProcessOptionalXStateFeatures")));
  auto thread_enabled =
      reinterpret_cast<GetFeatures>(reinterpret_cast<void*>(GetProcAddress(k32, "GetThreadEnabledXStateFeatures")));
  if (!enabled || !enable || !thread_enabled) return false;
  if ((enabled() & (kTileConfig | kTileData)) != (kTileConfig | kTileData)) return false;
  if (!enable(kTileData)) return false;
  return (thread_enabled() & kTileData) != 0;
}

bool arm_bf16() { return false; }

void* load_library(const std::string& path, std::string* why) {
  std::wstring w;
  HMODULE h = widen(path, &w) ? LoadLibraryW(w.c_str()) : nullptr;
  if (!h && why) *why = last_error();
  return reinterpret_cast<void*>(h);
}

void* library_symbol(void* library, const char* name) {
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), name));
}

std::string module_path(const void* address) {
  HMODULE m = nullptr;
  if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          static_cast<LPCWSTR>(address), &m))
    return "";
  std::wstring buf(MAX_PATH, L'\0');
  for (;;) {
    DWORD n = GetModuleFileNameW(m, buf.data(), DWORD(buf.size()));
    if (n == 0) return "";
    if (n < buf.size()) return narrow(buf.data(), n);
    buf.resize(buf.size() * 2);
  }
}

// With no slot left, the flag reads false forever: the caller redoes its once-per-thread work each time.
unsigned tls_slot() { return unsigned(TlsAlloc()); }
bool tls_flag(unsigned slot) { return slot != TLS_OUT_OF_INDEXES && TlsGetValue(slot) != nullptr; }
void set_tls_flag(unsigned slot) {
  if (slot != TLS_OUT_OF_INDEXES) TlsSetValue(slot, reinterpret_cast<void*>(1));
}

std::string last_error() { return error_text(GetLastError()); }

}  // namespace tessera::platform
#endif
