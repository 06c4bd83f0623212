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

 private:
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
