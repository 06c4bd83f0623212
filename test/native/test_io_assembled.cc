// Assembled tensors (TensorSpec::pieces): a tensor whose stored bytes are several byte ranges of its file read
// one after the other, as llama.cpp's mmproj files split Qwen2's qkv (attn_q, attn_k, attn_v) and the patch
// kernel (two time steps). Every residency hands out the same bytes (Q8_0 pieces widened), reads each piece
// once per stage read, and allocates what weight_memory predicts; a piece past the file or a Q8_0 piece of
// partial blocks is refused.
#include <cstring>
#include <functional>

#include "common/dtype.h"
#include "common/error.h"
#include "harness.h"
#include "io/mapped_store.h"
#include "io/resident_store.h"
#include "io/spec_bounds.h"
#include "io/stream_store.h"
#include "io/weight_store_factory.h"
#include "io_test_util.h"

using namespace tessera;
using namespace iotest;

namespace {

Code failure(const std::function<void()>& fn, std::string* msg) {
  try {
    fn();
  } catch (const Error& e) {
    *msg = e.what();
    return e.code();
  }
  return Code::Internal;  // "no error" is never what these tests expect
}

// A tensor of `elems` elements of `dt` whose stored bytes are `pieces`, in order.
TensorSpec assembled(const std::string& role, DType dt, int64_t elems, std::vector<ByteRange> pieces) {
  TensorSpec t;
  t.role = role;
  t.name = "t." + role;
  t.dtype = dt;
  t.shape = {elems};
  t.offset = pieces.front().offset;
  for (const ByteRange& r : pieces) t.length += r.length;
  t.pieces = std::move(pieces);
  return t;
}

// The stored bytes of a tensor: its ranges of `data`, back to back.
std::vector<unsigned char> gathered(const TensorSpec& t, const std::vector<unsigned char>& data) {
  std::vector<unsigned char> out;
  for (const ByteRange& r : t.ranges()) out.insert(out.end(), data.begin() + long(r.offset), data.begin() + long(r.offset + r.length));
  return out;
}

}  // namespace

TEST("stores: an assembled tensor is its pieces back to back in every residency; reads and memory as predicted") {
  // The file: a pattern; each stage joins three 96-byte bf16 parts 160 bytes apart in reverse order (as q | k | v
  // whose neighbours lie between them), two f32 parts interleaved 16 bytes at a time (a kernel's time steps),
  // two Q8_0 parts (3 blocks each) stacked, and a plain f32 vector read as it is.
  const std::vector<unsigned char> data = pattern(0, 8192);
  TowerSpec spec;
  spec.family = "test";
  for (int s = 0; s < 3; ++s) {
    const uint64_t at = 64 + uint64_t(s) * 2048;
    StageSpec st;
    st.name = "block." + std::to_string(s);
    st.kind = "block";
    st.index = s;
    st.tensors.push_back(assembled("qkv", DType::BF16, 3 * 48, {{at + 320, 96}, {at + 160, 96}, {at, 96}}));
    std::vector<ByteRange> steps;
    for (uint64_t c = 0; c < 4; ++c) steps.push_back({at + 512 + 16 * c, 16}), steps.push_back({at + 640 + 16 * c, 16});
    st.tensors.push_back(assembled("patch", DType::F32, 32, steps));
    st.tensors.push_back(assembled("q8", DType::Q8_0, 192, {{at + 800, 102}, {at + 1000, 102}}));
    st.tensors.push_back(tensor("norm", 0, at + 1200, 10, DType::F32));
    spec.stages.push_back(st);
  }
  TempFile f(data);
  spec.files = {f.path};
  FakeBackend be;
  const WeightMemory m = weight_memory(spec, 2);
  uint64_t stored = 0, pieces = 0, held = 0;
  for (const auto& st : spec.stages)
    for (const auto& t : st.tensors) {
      stored += t.length;
      pieces += t.ranges().size();
      held += t.pieces.empty() ? 0 : (t.dtype == DType::Q8_0 ? 192 * 4 : t.length);
    }
  EXPECT(m.file_bytes == stored);  // the pieces, nothing between them
  EXPECT_MSG(m.mapped >= held && m.mapped < held + 3 * 3 * 64, m.mapped << " vs " << held);  // held apart, 64-byte aligned
  {
    auto resident = make_resident_store(spec, be);
    auto mapped = make_mapped_store(spec, be);
    auto stream = make_stream_store(spec, be, 2);
    EXPECT(resident->stats().resident_bytes == m.resident);
    EXPECT(mapped->stats().resident_bytes == m.mapped);
    EXPECT(stream->stats().resident_bytes == m.stream);
    WeightStore* stores[] = {resident.get(), mapped.get(), stream.get()};
    for (auto* s : stores) s->begin_pass();
    for (size_t n = 0; n < spec.stages.size(); ++n) {
      const StageSpec& st = spec.stages[n];
      std::vector<unsigned char> q8 = gathered(st.tensors[2], data);
      std::vector<float> want_q8(192);
      widen_to_f32(q8.data(), DType::Q8_0, want_q8.data(), want_q8.size());
      for (auto* s : stores) {
        const StageWeights& w = s->acquire(n);
        for (size_t i : {size_t(0), size_t(1), size_t(3)}) {
          const std::vector<unsigned char> want = gathered(st.tensors[i], data);
          EXPECT_MSG(std::memcmp(w.host(st.tensors[i].role), want.data(), want.size()) == 0, s->residency() << " " << st.tensors[i].role);
        }
        EXPECT(w.get("qkv").cols == 144 && w.get("qkv").dtype == DType::BF16);
        EXPECT(w.get("q8").dtype == DType::F32);
        EXPECT_MSG(std::memcmp(w.host("q8"), want_q8.data(), want_q8.size() * 4) == 0, s->residency() << " q8");
        s->release(n);
      }
    }
    for (auto* s : stores) s->end_pass();
    EXPECT(stream->stats().bytes_read == stored && resident->stats().bytes_read == stored);
    EXPECT_MSG(resident->stats().reads == pieces, resident->stats().reads << " reads, " << pieces << " pieces");
  }
  EXPECT(be.live_buffers == 0);
}

TEST("assembled tensors: a piece past the file, or a Q8_0 piece of partial blocks, is refused naming the tensor") {
  const std::vector<unsigned char> data = pattern(0, 512);
  TempFile f(data);
  TowerSpec spec;
  spec.family = "test";
  spec.files = {f.path};
  StageSpec st;
  st.name = "block.0";
  st.kind = "block";
  st.tensors.push_back(assembled("qkv", DType::F32, 64, {{0, 128}, {448, 128}}));  // the second runs past 512
  spec.stages.push_back(st);
  std::string msg;
  EXPECT(failure([&] { check_tensors_within_files(spec, {512}); }, &msg) == Code::WeightsCorrupt);
  EXPECT_MSG(msg.find("t.qkv") != std::string::npos && msg.find("576") != std::string::npos, msg);
  spec.stages[0].tensors[0] = assembled("q8", DType::Q8_0, 64, {{0, 40}, {100, 28}});  // 68 bytes, but 40 + 28
  EXPECT(failure([&] { stage_layout(spec.stages[0]); }, &msg) == Code::WeightsCorrupt);
  EXPECT_MSG(msg.find("t.q8") != std::string::npos && msg.find("whole number of Q8_0 blocks") != std::string::npos, msg);
}
