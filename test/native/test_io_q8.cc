// Q8_0 weights (ggml's block_q8_0): widened to f32 exactly as ggml's dequantize_row_q8_0, in place
// as the stores read them; every residency hands out the same f32 views; the bytes read stay the
// file's (Q8_0's) size, and what each store allocates is what weight_memory predicts.
#include <cstring>
#include <functional>
#include <random>

#include "common/dtype.h"
#include "common/error.h"
#include "harness.h"
#include "io/mapped_store.h"
#include "io/resident_store.h"
#include "io/stream_store.h"
#include "io/weight_store_factory.h"
#include "io_test_util.h"

using namespace tessera;
using namespace iotest;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// One block: the f16 scale's bits, then 32 int8.
void put_block(std::vector<unsigned char>& out, uint16_t scale, const std::function<int8_t(int)>& q) {
  out.push_back((unsigned char)(scale & 0xff));
  out.push_back((unsigned char)(scale >> 8));
  for (int j = 0; j < 32; ++j) out.push_back((unsigned char)q(j));
}

std::vector<unsigned char> random_blocks(size_t blocks, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v;
  for (size_t b = 0; b < blocks; ++b) {
    // Finite scales of every magnitude f16 has (subnormals included), either sign.
    uint16_t scale = uint16_t(rng() % 0x7c00) | uint16_t(rng() & 1 ? 0x8000 : 0);
    put_block(v, scale, [&](int) { return int8_t(rng() & 0xff); });
  }
  return v;
}

Code code_of(const std::function<void()>& fn, std::string* msg = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return Code::Internal;  // "no error" is never what these tests expect: Internal stands for it
}

TensorSpec q8_tensor(const std::string& role, uint64_t offset, int64_t rows, int64_t cols) {
  TensorSpec t;
  t.role = role;
  t.name = "t." + role;
  t.dtype = DType::Q8_0;
  t.shape = {rows, cols};
  t.offset = offset;
  t.length = uint64_t(rows * cols) / kQ8_0Block * kQ8_0BlockBytes;
  return t;
}

}  // namespace

TEST("q8_0: each value is the f16 scale times the int8, one f32 product (dequantize_row_q8_0)") {
  // Scale bits and what they are: 1, -0.5, the largest f16, the smallest subnormal, 0, inf, NaN.
  const uint16_t scales[] = {0x3c00, 0xb800, 0x7bff, 0x0001, 0x0000, 0x7c00, 0x7e00};
  const float values[] = {1.0f, -0.5f, 65504.0f, 5.9604644775390625e-08f, 0.0f, INFINITY, NAN};
  std::vector<unsigned char> raw;
  for (uint16_t s : scales) put_block(raw, s, [](int j) { return int8_t(j * 8 - 128); });  // -128 .. 120
  std::vector<float> out(raw.size() / kQ8_0BlockBytes * kQ8_0Block);
  widen_to_f32(raw.data(), DType::Q8_0, out.data(), out.size());
  for (size_t b = 0; b < std::size(scales); ++b)
    for (int j = 0; j < 32; ++j) {
      float want = float(j * 8 - 128) * values[b];
      float got = out[b * 32 + size_t(j)];
      EXPECT_MSG(bits(got) == bits(want) || (std::isnan(got) && std::isnan(want)), "block " << b << " j " << j << ": " << got << " vs " << want);
    }
  EXPECT(out[0] == -128.0f && out[2 * 32] == -128.0f * 65504.0f);
  EXPECT(std::isnan(out[4 * 32 + 16]) == false && out[4 * 32 + 16] == 0.0f);  // 0 scale: zeros
  EXPECT(std::isnan(out[5 * 32 + 16]));                                        // inf x 0: NaN, as ggml
}

TEST("q8_0: widening in place (blocks at the end of the f32 extent) equals widening from elsewhere") {
  for (size_t blocks : {size_t(1), size_t(2), size_t(3), size_t(17), size_t(300)}) {
    std::vector<unsigned char> raw = random_blocks(blocks, unsigned(blocks));
    const size_t n = blocks * kQ8_0Block;
    std::vector<float> ref(n), buf(n);
    widen_to_f32(raw.data(), DType::Q8_0, ref.data(), n);
    std::memcpy(reinterpret_cast<char*>(buf.data()) + 4 * n - raw.size(), raw.data(), raw.size());
    widen_q8_0_in_place(buf.data(), n);
    EXPECT_MSG(std::memcmp(ref.data(), buf.data(), 4 * n) == 0, blocks << " blocks");
  }
  uint64_t bytes = 0;
  EXPECT(dtype_bytes(DType::Q8_0, 64, &bytes) && bytes == 68);
  EXPECT(!dtype_bytes(DType::Q8_0, 48, &bytes));  // not whole blocks
  DType d;
  EXPECT(parse_dtype("q8_0", &d) && d == DType::Q8_0 && std::string(dtype_name(d)) == "q8_0");
  EXPECT(dtype_computed(DType::Q8_0) == DType::F32 && dtype_computed(DType::BF16) == DType::BF16);
}

TEST("layout: a Q8_0 tensor is a run of its own, its bytes landing at the end of its f32 extent") {
  StageSpec st;
  st.tensors = {tensor("a", 0, 8, 10, DType::F32), q8_tensor("q", 48, 2, 64), tensor("b", 0, 48 + 136, 6, DType::F32)};
  StageLayout l = stage_layout(st);
  EXPECT(l.runs.size() == 3);  // a | q | b: b does not join q's run, nor a's across it
  const StageRun& q = l.runs[1];
  EXPECT(q.stored == DType::Q8_0 && q.elements == 128 && q.length == 136 && q.file_offset == 48);
  EXPECT(q.widened % 64 == 0 && q.slot_offset + q.length == q.widened + 4 * 128);
  EXPECT(l.offsets[1] == q.widened);
  EXPECT(l.runs[2].slot_offset >= q.widened + 4 * 128);
  EXPECT(l.bytes == l.runs[2].slot_offset + l.runs[2].length);
  // A length that is not the shape's blocks is refused before anything trusts it.
  st.tensors[1].length -= 34;
  std::string msg;
  EXPECT(code_of([&] { stage_layout(st); }, &msg) == Code::WeightsCorrupt);
  EXPECT_MSG(msg.find("t.q") != std::string::npos, msg);
}

TEST("stores: Q8_0 tensors come out as the same f32 in every residency; reads stay Q8_0's size; memory is as predicted") {
  // File: an 8-byte header, then per stage an f32 vector (at a 32-byte boundary), a Q8_0 [3, 64] and a bf16
  // vector.
  std::vector<unsigned char> data(8, 0);
  TowerSpec spec;
  spec.family = "test";
  std::vector<std::vector<unsigned char>> q8(3);
  for (int s = 0; s < 3; ++s) {
    StageSpec st;
    st.name = "block." + std::to_string(s);
    st.kind = "block";
    st.index = s;
    auto f32 = pattern(s, 40);
    data.resize((data.size() + 31) / 32 * 32);  // GGUF's alignment: every tensor on its element size
    st.tensors.push_back(tensor("norm", 0, data.size(), 10, DType::F32));
    data.insert(data.end(), f32.begin(), f32.end());
    q8[size_t(s)] = random_blocks(6, unsigned(100 + s));
    st.tensors.push_back(q8_tensor("w", data.size(), 3, 64));
    data.insert(data.end(), q8[size_t(s)].begin(), q8[size_t(s)].end());
    auto bf = pattern(s + 7, 14);
    st.tensors.push_back(tensor("bias", 0, data.size(), 7, DType::BF16));
    data.insert(data.end(), bf.begin(), bf.end());
    spec.stages.push_back(st);
  }
  TempFile f(data);
  spec.files = {f.path};
  FakeBackend be;
  const WeightMemory m = weight_memory(spec, 2);
  uint64_t stored = 0;
  for (const auto& st : spec.stages)
    for (const auto& t : st.tensors) stored += t.length;
  EXPECT(m.file_bytes == stored);   // what is read: the file's bytes, Q8_0 at its own size
  EXPECT(m.mapped == 3 * 3 * 64 * 4);  // the mapped store's own: the widened Q8_0 tensors
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
      std::vector<float> want(3 * 64);
      widen_to_f32(q8[n].data(), DType::Q8_0, want.data(), want.size());
      for (auto* s : stores) {
        const StageWeights& w = s->acquire(n);
        const backend::Tensor& t = w.get("w");
        EXPECT_MSG(t.dtype == DType::F32 && t.rows == 3 && t.cols == 64, s->residency());
        EXPECT_MSG(std::memcmp(w.host("w"), want.data(), want.size() * 4) == 0, s->residency() << " stage " << n);
        EXPECT(uintptr_t(static_cast<const char*>(w.host("w"))) % 64 == 0);
        for (size_t i : {size_t(0), size_t(2)}) {  // the float tensors: the file's bytes as they are
          const TensorSpec& ft = spec.stages[n].tensors[i];
          EXPECT_MSG(std::memcmp(w.host(ft.role), data.data() + ft.offset, ft.length) == 0, s->residency() << " " << ft.role);
        }
        s->release(n);
      }
    }
    for (auto* s : stores) s->end_pass();
    EXPECT(stream->stats().bytes_read == stored);
    EXPECT(resident->stats().bytes_read == stored);
  }
  EXPECT(be.live_buffers == 0);
}
