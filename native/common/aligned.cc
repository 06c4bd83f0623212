#include "common/aligned.h"

#include <unistd.h>
#include <sys/mman.h>

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
constexpr size_t kMapFrom = size_t(1) << 20;  // from here on, blocks are mapped (see aligned.h)

[[noreturn]] void out_of_memory(size_t bytes) {
  fail(Code::OutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes");
}

// A mapping of `bytes` aligned to `alignment`: over-map by the alignment, then unmap the head and
// the tail around the aligned block, so that exactly [p, p + round_up(bytes, page)) stays mapped.
// Blocks from kHugeFrom on are 2 MiB aligned and advised for huge pages (see kHugePage).
void* map_aligned(size_t bytes, size_t alignment) {
  const size_t ps = page_size();
  if (alignment < ps) alignment = ps;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugeFrom && alignment < kHugePage && kHugePage % alignment == 0) alignment = kHugePage;
#endif
  const size_t len = round_up(bytes, ps), extra = alignment > ps ? alignment : 0;
  void* raw = mmap(nullptr, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) out_of_memory(bytes);
  char* base = static_cast<char*>(raw);
  char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<size_t>(base), alignment));
  if (p > base) munmap(base, size_t(p - base));
  if (base + len + extra > p + len) munmap(p + len, size_t(base + len + extra - (p + len)));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == kHugePage) madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return p;
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
    case Source::Map: return map_aligned(bytes, alignment);
    case Source::Aligned:
      if (posix_memalign(&p, alignment, round_up(bytes ? bytes : 1, alignment)) != 0) out_of_memory(bytes);
      return p;
  }
  return p;
}

void free_block(void* p, size_t bytes, size_t alignment) noexcept {
  if (!p) return;
  switch (source_for(bytes, alignment)) {
    case Source::Heap: ::operator delete(p, std::align_val_t(alignment ? alignment : alignof(std::max_align_t))); break;
    case Source::Map: munmap(p, round_up(bytes, page_size())); break;
    case Source::Aligned: std::free(p); break;
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
