#pragma once
#include <memory>
#include <string>

#include "io/weight_store.h"

namespace tessera {

// residency: "resident" | "mapped" | "stream" (the policy `auto` is resolved in TypeScript).
std::unique_ptr<WeightStore> make_weight_store(const TowerSpec& spec, const std::string& residency,
                                               backend::Backend& backend, int slots);

// What each residency holds of the weights in memory of its own (not the page cache's), from the
// formulas the stores allocate by: what tower.info.memory and the `auto` policy read.
struct WeightMemory {
  uint64_t resident = 0;    // `resident`: every stage's layout
  uint64_t slot = 0;        // `stream`: one slot
  uint64_t stream = 0;      // `stream`: slots x slot
  uint64_t file_bytes = 0;  // the tower's bytes in its files (what `mapped` maps and touches)
  uint64_t mapped = 0;      // `mapped`: its quantised tensors widened to f32 and its assembled ones gathered (held_stage_bytes)
};
WeightMemory weight_memory(const TowerSpec& spec, int slots);

}  // namespace tessera
