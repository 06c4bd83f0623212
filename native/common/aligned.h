// Page-aligned, owned memory. Slots, scratch and resident weights all come from here so that a
// Metal backend can wrap them without a copy (newBufferWithBytesNoCopy needs page alignment).
//
// Large blocks (>= 1 MiB) are mapped from the OS directly and unmapped when freed, never carved
// from malloc's arenas: glibc raises its mmap threshold after a large free, so per-encode buffers
// would then come from a thread's arena and stay there, and a process encoding image after image on
// libuv's threads would keep up to one spent output per thread (tens of MiB at 4,096 patches).
#pragma once
#include <cstddef>
#include <new>

namespace tessera {

size_t page_size();                                  // the OS page size, read at run time
inline size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The one allocation path: `bytes` aligned to `alignment` (0: the page size). free_block takes
// what alloc_block returned, with the same bytes and alignment. ERR_OUT_OF_MEMORY on failure.
void* alloc_block(size_t bytes, size_t alignment);
void free_block(void* p, size_t bytes, size_t alignment) noexcept;

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
  size_t size_ = 0, alignment_ = 0;
};

// A std::allocator whose large blocks take alloc_block's path: for the host-side arrays an encode
// hands back (embeddings, stage outputs), so that they are returned to the OS when freed.
template <class T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <class U>
  PageAllocator(const PageAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(alloc_block(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { free_block(p, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const PageAllocator<U>&) const { return true; }
};

}  // namespace tessera
