// Helpers for the io table tests: a host-memory fake backend::Backend that records buffers and lets a
// test decide when submitted work "completes", temporary weight files, and hand-built TowerSpecs.
#pragma once
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#include "common/error.h"
#include "backend/backend.h"
#include "io/tower_spec.h"

namespace iotest {

using namespace tessera;

// The op set as no-ops: the io tests exercise memory and completion, never arithmetic.
class NoOpsBackend : public backend::Backend {
 public:
  void upload(backend::Buffer*, size_t, const void*, size_t) override {}
  void download(void*, const backend::Tensor&) override {}
  void linear(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, const backend::LinearArgs&) override {}
  void layer_norm(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, float) override {}
  void rms_norm(const backend::Tensor&, const backend::Tensor&, const backend::Tensor*, int64_t, float, const backend::Tensor*) override {}
  void add(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&) override {}
  void affine(const backend::Tensor&, const backend::Tensor&, const backend::Tensor*, const backend::Tensor*, float, float) override {}
  void rope(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, int64_t, int64_t, int64_t, const backend::HeadNorm*) override {}
  void attention(const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, const backend::Tensor&, int64_t, int64_t,
                 float, const std::vector<backend::Segment>&, backend::AttnProducts) override {}
  void gather_sum(const backend::Tensor&, const backend::Tensor&, backend::Buffer*, int64_t, bool) override {}
  int64_t count_nonfinite(const backend::Tensor&, int64_t*) override { return 0; }
};

// Runs no ops. submit() either completes at once (like the CPU backend) or, with defer = true,
// queues the completion until complete_one()/complete_all() (like a GPU still reading a slot).
class FakeBackend final : public NoOpsBackend {
 public:
  bool defer = false;
  int live_buffers = 0;
  std::vector<std::pair<void*, size_t>> wrapped;  // every wrap_host call
  std::deque<std::function<void()>> pending;

  const char* name() const override { return "fake"; }
  backend::Buffer* alloc(size_t bytes) override {
    auto* b = new backend::Buffer;
    b->host = std::malloc(bytes ? bytes : 1);
    b->bytes = bytes;
    b->native = b->host;  // marks "owned"
    ++live_buffers;
    return b;
  }
  backend::Buffer* wrap_host(void* host, size_t bytes) override {
    auto* b = new backend::Buffer;
    b->host = host;
    b->bytes = bytes;
    wrapped.push_back({host, bytes});
    ++live_buffers;
    return b;
  }
  void release(backend::Buffer* buf) override {
    if (!buf) return;
    if (buf->native) std::free(buf->native);
    delete buf;
    --live_buffers;
  }
  void submit(std::function<void()> on_complete) override {
    if (defer)
      pending.push_back(std::move(on_complete));
    else
      on_complete();
  }
  void finish() override { complete_all(); }
  bool complete_one() {
    if (pending.empty()) return false;
    auto fn = std::move(pending.front());
    pending.pop_front();
    fn();
    return true;
  }
  void complete_all() {
    while (complete_one()) {
    }
  }
};

// A temporary file that deletes itself, written in binary.
struct TempFile {
  std::string path;
  explicit TempFile(const std::vector<unsigned char>& bytes) {
    static std::atomic<unsigned> serial{0};
    static const unsigned long long process_tag = (unsigned long long)std::random_device{}() << 32 | std::random_device{}();
    auto p = std::filesystem::temp_directory_path() /
             ("tessera-io-" + std::to_string(process_tag) + "-" + std::to_string(serial++));
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    path = p.string();
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  // False when the OS refuses (Windows will not truncate a file while it is mapped).
  bool truncate_to(size_t n) const {
    std::error_code ec;
    std::filesystem::resize_file(path, n, ec);
    return !ec;
  }
};

// Makes the OS's "last error" an I/O error, as a failing read would leave it (errno; GetLastError).
inline void set_os_error(int posix_errno) {
#if defined(_WIN32)
  (void)posix_errno;
  SetLastError(ERROR_CRC);  // "Data error (cyclic redundancy check)"
#else
  errno = posix_errno;
#endif
}

// Deterministic file contents: byte i of file f.
inline unsigned char pattern_byte(int f, uint64_t i) { return (unsigned char)((i * 131u + uint64_t(f) * 17u + (i >> 9)) & 0xff); }
inline std::vector<unsigned char> pattern(int f, size_t n) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(f, i);
  return v;
}

inline TensorSpec tensor(const std::string& role, int file, uint64_t offset, int64_t elems, DType dt = DType::BF16) {
  TensorSpec t;
  t.role = role;
  t.name = "t." + role;
  t.dtype = dt;
  t.shape = {elems};
  t.file = file;
  t.offset = offset;
  t.length = uint64_t(elems) * dtype_size(dt);
  return t;
}

// A tower of `stages` stages in one file, each stage a few tensors laid back to back (like a
// safetensors file), with stage s about (s % 3 + 1) * unit bytes so stage sizes differ.
inline TowerSpec sequential_tower(const std::string& file, int stages, uint64_t unit, uint64_t* file_bytes) {
  TowerSpec spec;
  spec.family = "test";
  spec.files = {file};
  uint64_t at = 8;  // as if after a small header
  for (int s = 0; s < stages; ++s) {
    StageSpec st;
    st.name = "block." + std::to_string(s);
    st.kind = "block";
    st.index = s;
    int64_t n = int64_t((uint64_t(s % 3) + 1) * unit / 2);
    st.tensors.push_back(tensor("w", 0, at, n));
    at += uint64_t(n) * 2;
    st.tensors.push_back(tensor("b", 0, at, 3));  // an odd-sized bias: breaks 64-byte alignment
    at += 6;
    st.tensors.push_back(tensor("c", 0, at, n / 2));
    at += uint64_t(n / 2) * 2;
    spec.stages.push_back(st);
  }
  *file_bytes = at + 8;
  return spec;
}

// Every tensor of a stage, read through its view, equals the file's bytes.
template <class Weights>
bool stage_matches_file(const TowerSpec& spec, size_t s, const Weights& w) {
  for (const auto& t : spec.stages[s].tensors) {
    auto* p = static_cast<const unsigned char*>(w.host(t.role));
    for (uint64_t i = 0; i < t.length; ++i)
      if (p[i] != pattern_byte(t.file, t.offset + i)) return false;
  }
  return true;
}

}  // namespace iotest
