#include "io/spec_bounds.h"

#include <string>

#include "common/error.h"

namespace tessera {

static void check_stage(const TowerSpec& spec, const StageSpec& st, const std::vector<uint64_t>& file_bytes) {
  for (const auto& t : st.tensors) {
    if (t.file < 0 || size_t(t.file) >= file_bytes.size() || size_t(t.file) >= spec.files.size())
      fail(Code::WeightsCorrupt, "tensor '" + t.name + "' names file #" + std::to_string(t.file) + " of " +
                                     std::to_string(spec.files.size()));
    for (const ByteRange& r : t.ranges()) {
      uint64_t end = r.offset + r.length;
      if (end < r.offset || end > file_bytes[size_t(t.file)])
        fail(Code::WeightsCorrupt, "'" + spec.files[size_t(t.file)] + "' is " + std::to_string(file_bytes[size_t(t.file)]) +
                                       " bytes but tensor '" + t.name + "' needs bytes [" + std::to_string(r.offset) +
                                       ", " + std::to_string(end) + "): the file is truncated or changed");
    }
  }
}

void check_tensors_within_files(const TowerSpec& spec, const std::vector<uint64_t>& file_bytes, long stage) {
  if (stage >= 0) {
    check_stage(spec, spec.stages.at(size_t(stage)), file_bytes);
    return;
  }
  for (const auto& st : spec.stages) check_stage(spec, st, file_bytes);
}

}  // namespace tessera
