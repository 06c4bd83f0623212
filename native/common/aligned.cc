#include "common/aligned.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/platform.h"

namespace tessera {

size_t page_size() { return platform::page_size(); }

namespace {
constexpr size_t kMapFrom = size_t(1) << 20;  // from here on, blocks are mapped (see aligned.h)

[[noreturn]] void out_of_memory(size_t bytes) {
  fail(Code::OutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes");
}

// Which allocator a block comes from: alloc_block and free_block must agree, so one rule decides.
enum class Source { Heap, Aligned, Map };
Source source_for(size_t bytes, size_t alignment) {
  if (bytes >= kMapFrom) return Source::Map;
  return alignment < page_size() ? Source::Heap : Source::Aligned;
}
}  // namespace

void* alloc_block(size_t bytes, size_t alignment) {
  void* p = nullptr;
  switch (source_for(bytes, alignment)) {
    case Source::Heap:  // small: the C++ heap
      p = ::operator new(bytes ? bytes : 1, std::align_val_t(alignment ? alignment : alignof(std::max_align_t)),
                         std::nothrow);
      if (!p) out_of_memory(bytes);
      return p;
    case Source::Map:
      p = platform::map_memory(bytes, alignment);
      if (!p) out_of_memory(bytes);
      return p;
    case Source::Aligned:
      p = platform::aligned_malloc(round_up(bytes ? bytes : 1, alignment), alignment);
      if (!p) out_of_memory(bytes);
      return p;
  }
  return p;
}

void free_block(void* p, size_t bytes, size_t alignment) noexcept {
  if (!p) return;
  switch (source_for(bytes, alignment)) {
    case Source::Heap: ::operator delete(p, std::align_val_t(alignment ? alignment : alignof(std::max_align_t))); break;
    case Source::Map: platform::unmap_memory(p, bytes); break;
    case Source::Aligned: platform::aligned_free(p); break;
  }
}

AlignedBuffer::AlignedBuffer(size_t bytes, size_t alignment) {
  alignment_ = alignment ? alignment : page_size();
  size_ = bytes;
  if (bytes) data_ = alloc_block(bytes, alignment_);
}

AlignedBuffer::~AlignedBuffer() { free_block(data_, size_, alignment_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), alignment_(std::exchange(o.alignment_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    free_block(data_, size_, alignment_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    alignment_ = std::exchange(o.alignment_, 0);
  }
  return *this;
}

}  // namespace tessera
