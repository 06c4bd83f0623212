#pragma once
#include <memory>
#include <string>

#include "io/weight_store.h"

namespace tessera {

// residency: "resident" | "mapped" | "stream" (the policy `auto` is resolved in TypeScript).
std::unique_ptr<WeightStore> make_weight_store(const TowerSpec& spec, const std::string& residency,
                                               gpu::Backend& backend, int slots);

}  // namespace tessera
