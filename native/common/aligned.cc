#include "common/aligned.h"

#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdlib>
#include <string>
#include <utility>

#include "common/error.h"

namespace tessera {

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
}  // namespace

AlignedBuffer::AlignedBuffer(size_t bytes, size_t alignment) {
  if (alignment == 0) alignment = page_size();
  size_ = bytes;
  if (bytes == 0) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugeFrom && alignment < kHugePage && kHugePage % alignment == 0) alignment = kHugePage;
#endif
  if (posix_memalign(&data_, alignment, round_up(bytes, alignment)) != 0) {
    data_ = nullptr;
    fail(Code::OutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes");
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == kHugePage) madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace tessera
