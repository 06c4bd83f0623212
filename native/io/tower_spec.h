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

// One byte range of a file.
struct ByteRange {
  uint64_t offset = 0, length = 0;
};

struct TensorSpec {
  std::string role;   // what the model calls it: "attn.qkv.weight"
  std::string name;   // what the file calls it (for messages)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int file = 0;         // index into TowerSpec::files
  uint64_t offset = 0;  // absolute byte offset in that file
  uint64_t length = 0;  // bytes
  // An assembled tensor (a file that splits what the model computes as one, e.g. llama.cpp's
  // attn_q | attn_k | attn_v for a fused qkv): its stored bytes are these ranges of `file` read
  // one after the other (the family's builder says which, src/spec/assemble.ts); `offset` is the
  // first's and `length` their total. Empty for a tensor stored in one piece.
  std::vector<ByteRange> pieces;

  // The byte ranges holding the tensor's stored bytes, in order: its pieces, or its one range.
  std::vector<ByteRange> ranges() const {
    return pieces.empty() ? std::vector<ByteRange>{{offset, length}} : pieces;
  }
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
