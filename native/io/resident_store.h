// The `resident` residency: every stage is read once at open into one page-aligned allocation
// per stage (laid out by stage_layout), wrapped once by the backend.
#pragma once
#include <memory>

#include "io/weight_store.h"

namespace tessera {

std::unique_ptr<WeightStore> make_resident_store(const TowerSpec& spec, backend::Backend& backend);

}  // namespace tessera
