// stage_layout: tensors contiguous in a file share one run (one pread), runs keep the file's
// alignment modulo 64, and the layout does not depend on the order the spec lists tensors in.
#include "common/error.h"
#include "harness.h"
#include "io/weight_store.h"
#include "io_test_util.h"

using namespace tessera;
using iotest::tensor;

TEST("layout: back-to-back tensors of a file form one run, whatever the spec order") {
  StageSpec st;
  st.tensors = {tensor("c", 0, 1000 + 2304 + 6, 100), tensor("a", 0, 1000, 1152), tensor("b", 0, 1000 + 2304, 3)};
  StageLayout l = stage_layout(st);
  EXPECT(l.runs.size() == 1);
  EXPECT(l.runs[0].file_offset == 1000);
  EXPECT(l.runs[0].length == 2304 + 6 + 200);
  EXPECT(l.runs[0].slot_offset % 64 == 1000 % 64);
  // Each tensor sits where the run put its file bytes.
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    EXPECT(l.offsets[i] - l.runs[0].slot_offset == st.tensors[i].offset - 1000);
    EXPECT(l.offsets[i] % 64 == st.tensors[i].offset % 64);
  }
  EXPECT(l.bytes == l.runs[0].slot_offset + l.runs[0].length);
}

TEST("layout: small gaps are read along, large gaps and other files start new runs") {
  StageSpec st;
  st.tensors = {tensor("a", 0, 0, 10), tensor("b", 0, 32, 10),  // 12-byte gap (GGUF-style padding)
                tensor("c", 0, 4096, 8), tensor("d", 1, 96, 8)};
  StageLayout l = stage_layout(st);
  EXPECT(l.runs.size() == 3);
  EXPECT(l.runs[0].length == 52);
  EXPECT(l.runs[1].file == 0 && l.runs[1].file_offset == 4096 && l.runs[1].length == 16);
  EXPECT(l.runs[2].file == 1 && l.runs[2].file_offset == 96);
  for (size_t r = 1; r < l.runs.size(); ++r)  // runs never overlap in the slot
    EXPECT(l.runs[r].slot_offset >= l.runs[r - 1].slot_offset + l.runs[r - 1].length);
  for (size_t i = 0; i < st.tensors.size(); ++i) EXPECT(l.offsets[i] % 64 == st.tensors[i].offset % 64);
}

TEST("layout: a tensor listed twice (tied weights) is read once") {
  StageSpec st;
  st.tensors = {tensor("a", 0, 128, 64), tensor("a2", 0, 128, 64)};
  StageLayout l = stage_layout(st);
  EXPECT(l.runs.size() == 1 && l.runs[0].length == 128);
  EXPECT(l.offsets[0] == l.offsets[1]);
}

TEST("layout: bind_stage views land on the layout offsets") {
  StageSpec st;
  st.tensors = {tensor("w", 0, 64, 32), tensor("b", 0, 0, 32)};
  StageLayout l = stage_layout(st);
  backend::Buffer buf;
  StageWeights w;
  bind_stage(st, &buf, 4096, w);
  EXPECT(w.get("w").offset == 4096 + l.offsets[0]);
  EXPECT(w.get("b").offset == 4096 + l.offsets[1]);
  EXPECT(w.get("w").rows == 1 && w.get("w").cols == 32);
  bool threw = false;
  try {
    w.get("missing");
  } catch (const Error& e) {
    threw = e.code() == Code::TensorMissing;
  }
  EXPECT(threw);
}

TEST("layout: a tensor its file misaligns (an unpadded safetensors header) gets an aligned run; mapped holds it") {
  StageSpec st;
  // f32 at 59 and bf16 at 1001: neither on its element size; the f32 at 2048 is.
  st.tensors = {tensor("w", 0, 59, 16, DType::F32), tensor("b", 0, 1001, 8), tensor("ok", 0, 2048, 4, DType::F32)};
  StageLayout l = stage_layout(st);
  EXPECT(l.offsets[0] % 64 == 0 && l.offsets[1] % 64 == 0);
  EXPECT(l.offsets[2] % 64 == 2048 % 64);
  for (const StageRun& r : l.runs) EXPECT(r.slot_offset + r.length <= l.bytes);
  EXPECT(held_apart(st.tensors[0]) && held_apart(st.tensors[1]) && !held_apart(st.tensors[2]));
  EXPECT(held_stage_bytes(st) >= 64 + 16);
}
