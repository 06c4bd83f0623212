// The `mapped` residency (docs/design.md#residency): the weight files are mmapped read-only and each stage's
// tensors are views into the mapping. Each stage's page-rounded window of each file it uses is
// wrapped once by the backend (small enough for any Metal buffer limit; overlapping windows are
// fine). The whole mapping is advised sequential; acquire(n) advises willneed on stage n+1.
#pragma once
#include <memory>

#include "io/weight_store.h"

namespace tessera {

std::unique_ptr<WeightStore> make_mapped_store(const TowerSpec& spec, backend::Backend& backend);

}  // namespace tessera
