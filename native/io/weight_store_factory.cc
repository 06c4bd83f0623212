#include "io/weight_store_factory.h"

#include "common/error.h"
#include "io/mapped_store.h"
#include "io/resident_store.h"
#include "io/stream_store.h"

namespace tessera {

std::unique_ptr<WeightStore> make_weight_store(const TowerSpec& spec, const std::string& residency,
                                               backend::Backend& backend, int slots) {
  if (residency == "resident") return make_resident_store(spec, backend);
  if (residency == "mapped") return make_mapped_store(spec, backend);
  if (residency == "stream") return make_stream_store(spec, backend, slots);
  fail(Code::InvalidArgument, "residency must be 'resident', 'mapped' or 'stream', got '" + residency + "'");
}

WeightMemory weight_memory(const TowerSpec& spec, int slots) {
  WeightMemory m;
  for (const auto& st : spec.stages) {
    StageLayout l = stage_layout(st);
    m.resident += l.bytes;  // what the resident store allocates per stage (and reports)
    for (const auto& r : l.runs) m.file_bytes += r.length;
    m.mapped += held_stage_bytes(st);
  }
  if (!spec.stages.empty()) m.slot = stream_slot_bytes(spec);
  m.stream = m.slot * uint64_t(slots < 1 ? 1 : slots);
  return m;
}

}  // namespace tessera
