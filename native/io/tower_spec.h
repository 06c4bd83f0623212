// The TowerSpec as native code sees it: built and validated in TypeScript (src/spec/), handed
// over as a plain JS object and converted by the addon. It is the single description of a tower:
// the dimensions every model reads (never a model-specific default) and, per stage in execution
// order, the named byte ranges of its tensors. io uses only the byte ranges; models use the rest.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tessera {

struct TensorSpec {
  std::string role;   // what the model calls it: "attn.qkv.weight"
  std::string name;   // what the file calls it (for messages)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int file = 0;         // index into TowerSpec::files
  uint64_t offset = 0;  // absolute byte offset in that file
  uint64_t length = 0;  // bytes
};

struct StageSpec {
  std::string name;  // "embed", "block.3", "deepstack.0", "merged", "pooled", "projected"
  std::string kind;  // "embed", "block", "deepstack", "merger", "pooler", "projector"
  int index = 0;     // block number / deepstack number; 0 otherwise
  std::vector<TensorSpec> tensors;

  const TensorSpec* find(const std::string& role) const;
  uint64_t bytes() const;  // sum of tensor lengths
};

struct TowerSpec {
  std::string family;                  // "qwen3_5", "qwen3_vl", "gemma4"
  std::map<std::string, double> dims;  // hidden, heads, head_dim, intermediate, out_hidden, eps, ...
  std::map<std::string, std::vector<double>> lists;  // deepstack_indexes, ...
  std::vector<std::string> files;
  std::vector<StageSpec> stages;

  // A dimension the model needs; a missing one is ERR_CONFIG_INVALID naming it.
  double num(const std::string& key) const;
  int64_t i64(const std::string& key) const;
  bool has(const std::string& key) const { return dims.count(key) != 0; }
  const std::vector<double>& list(const std::string& key) const;  // empty if absent
};

}  // namespace tessera
