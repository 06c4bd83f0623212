// Page-aligned, owned memory. Slots, scratch and resident weights all come from here so that a
// Metal backend can wrap them without a copy (newBufferWithBytesNoCopy needs page alignment).
#pragma once
#include <cstddef>

namespace tessera {

size_t page_size();                                  // the OS page size, read at run time
inline size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, size_t alignment = 0);  // alignment 0: the page size
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera
