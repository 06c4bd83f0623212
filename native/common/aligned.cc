#include "common/aligned.h"

#include <unistd.h>

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

AlignedBuffer::AlignedBuffer(size_t bytes, size_t alignment) {
  if (alignment == 0) alignment = page_size();
  size_ = bytes;
  if (bytes == 0) return;
  if (posix_memalign(&data_, alignment, round_up(bytes, alignment)) != 0) {
    data_ = nullptr;
    fail(Code::OutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes");
  }
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
