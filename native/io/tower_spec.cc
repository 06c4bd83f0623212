#include "io/tower_spec.h"

#include <cmath>

#include "common/error.h"

namespace tessera {

const TensorSpec* StageSpec::find(const std::string& role) const {
  for (const auto& t : tensors)
    if (t.role == role) return &t;
  return nullptr;
}

uint64_t StageSpec::bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.length;
  return n;
}

double TowerSpec::num(const std::string& key) const {
  auto it = dims.find(key);
  if (it == dims.end()) fail(Code::ConfigInvalid, "tower spec has no '" + key + "'");
  return it->second;
}

int64_t TowerSpec::i64(const std::string& key) const {
  double v = num(key);
  if (!(v >= 0 && v < 9.0e15) || std::floor(v) != v)
    fail(Code::ConfigInvalid, "tower spec field '" + key + "' must be a non-negative integer");
  return int64_t(v);
}

const std::vector<double>& TowerSpec::list(const std::string& key) const {
  static const std::vector<double> empty;
  auto it = lists.find(key);
  return it == lists.end() ? empty : it->second;
}

}  // namespace tessera
