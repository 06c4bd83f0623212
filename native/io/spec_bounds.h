// Every tensor of a spec must lie inside its file. TypeScript checks this when it parses the
// headers; the stores check it again against the files they actually opened, because a file can
// change between the two (and a mapped store would fault on a page past the end).
#pragma once
#include <cstdint>
#include <vector>

#include "io/tower_spec.h"

namespace tessera {

// ERR_WEIGHTS_CORRUPT naming the file, the tensor and both sizes when one ends past its file.
// `file_bytes[f]` is file f's size; `stage` < 0 checks every stage, else only that one.
void check_tensors_within_files(const TowerSpec& spec, const std::vector<uint64_t>& file_bytes, long stage = -1);

}  // namespace tessera
