#include "io/weight_store_factory.h"

#include "common/error.h"
#include "io/resident_store.h"

namespace tessera {

std::unique_ptr<WeightStore> make_weight_store(const TowerSpec& spec, const std::string& residency,
                                               gpu::Backend& backend, int slots) {
  if (residency == "resident") return make_resident_store(spec, backend);
  fail(Code::InvalidArgument, "residency '" + residency + "' is not available in this build");
}

}  // namespace tessera
