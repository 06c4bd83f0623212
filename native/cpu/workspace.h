// Scratch memory of the CPU kernels: page-aligned buffers that grow on demand and are kept for
// the backend's lifetime, so steady-state ops allocate nothing. Slot t belongs to task t of a
// ThreadPool::run_tasks call (each task runs on one thread), so slots need no locking.
#pragma once
#include <cstddef>
#include <vector>

#include "common/aligned.h"

namespace tessera::cpu {

enum class Scratch { PackA, Accum, Attn, Count };

class Workspace {
 public:
  explicit Workspace(int slots) : slots_(size_t(slots)) {}
  int slots() const { return int(slots_.size()); }

  // At least `floats` floats of slot-private scratch of the given kind (contents undefined).
  float* slot(int slot, Scratch kind, size_t floats) { return grow(slots_[size_t(slot)].b[int(kind)], floats); }
  // Scratch shared by all threads of one op (e.g. the packed weight panel).
  float* shared(size_t floats) { return grow(shared_, floats); }

  // Bytes held now (each buffer rounded up to whole pages, as allocated).
  size_t held_bytes() const {
    size_t n = held(shared_);
    for (const Slot& s : slots_)
      for (const AlignedBuffer& b : s.b) n += held(b);
    return n;
  }
  // What a buffer grown to `floats` floats holds (the rounding of grow()).
  static size_t bytes_for(size_t floats) { return round_up((floats ? floats : 1) * sizeof(float), page_size()); }

 private:
  static size_t held(const AlignedBuffer& b) { return b.size() ? round_up(b.size(), page_size()) : 0; }
  static float* grow(AlignedBuffer& b, size_t floats) {
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    if (b.size() < bytes) b = AlignedBuffer(bytes);
    return b.as<float>();
  }
  struct Slot {
    AlignedBuffer b[int(Scratch::Count)];
  };
  std::vector<Slot> slots_;
  AlignedBuffer shared_;
};

}  // namespace tessera::cpu
