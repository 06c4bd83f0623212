// A tower's scratch for one encode, laid out by one function of the tower that runs twice: over an
// Arena that only measures (the memory prediction, VisionModel::scratch_bytes) and over one that
// allocates (the encode). Each region is named once, in that function, so the bytes predicted and the
// bytes allocated cannot drift apart.
//
// The scratch is one backend buffer; tensor() carves [rows, cols] regions from it, 64-byte
// aligned. Regions whose lives do not overlap share memory: the regions made inside a Scope are laid
// out from where the scope began, and the next scope starts there again, so the scratch is as large
// as the furthest any of these alternatives reaches. buffer() is a separate backend buffer (gather_sum
// reads its lookup tables from a buffer of their own).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "models/vision_model.h"

namespace tessera {

class Arena {
 public:
  Arena() = default;  // measures only: tensors have no buffer
  // Allocates the scratch `layout` (a callable taking Arena&) measures; call the same layout on the
  // arena next for its tensors. They and the buffers live until the arena is destroyed, which waits
  // for the device first.
  template <class Layout>
  Arena(backend::Backend& backend, Layout&& layout) : backend_(&backend) {
    Arena measuring;
    layout(measuring);
    allocate(measuring.scratch_bytes());
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A [rows, cols] region of `dtype`: f32, or the backend's activation_dtype() for a tower's activations.
  backend::Tensor tensor(int64_t rows, int64_t cols, DType dtype = DType::F32);
  backend::Buffer* buffer(uint64_t bytes);

  class Scope {
   public:
    explicit Scope(Arena& a) : a_(a), mark_(a.top_) {}
    ~Scope() { a_.top_ = mark_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Arena& a_;
    uint64_t mark_;
  };

  uint64_t scratch_bytes() const { return total_; }
  uint64_t bytes() const { return total_ + buffers_bytes_; }  // scratch and separate buffers

 private:
  void allocate(uint64_t scratch_bytes);

  backend::Backend* backend_ = nullptr;
  std::unique_ptr<ScopedBuffer> scratch_;
  std::vector<std::unique_ptr<ScopedBuffer>> buffers_;
  uint64_t top_ = 0, total_ = 0, buffers_bytes_ = 0;
};

// The same region seen as [rows, cols] (rows · cols no more than it holds): one region serving phases
// that need different shapes.
backend::Tensor view_as(const backend::Tensor& region, int64_t rows, int64_t cols);

// The scratch bytes of `layout` (a callable taking Arena&) for one encode: what both
// scratch_bytes() predicts and the encode allocates.
template <class Layout>
uint64_t measure(Layout&& layout) {
  Arena a;
  layout(a);
  return a.bytes();
}

}  // namespace tessera
