// attention: one dispatch per segment (the rows of one image attend to each other only), tiled with an
// online softmax in attention.metal: the flash kernels (kAttnBQ query rows per threadgroup on simdgroup
// matrices; their own kernels for head_dim 64, 72 and 80) when head_dim is a multiple of 8, else the row
// kernel. The key tile is kAttnBK rows, or kAttnBKSmall when that would not fit in threadgroup memory.
// q and out may have another row count than k and v when the one segment is all of k
// (backend/backend.h): one dispatch of q's rows against all the keys.
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

// Threadgroup memory of each kernel (metal/shared/args.h), rounded to 16 bytes.
static uint32_t round16(uint32_t b) { return (b + 15) / 16 * 16; }
static uint32_t flash_tg_bytes(uint32_t kblock, uint32_t hd, uint32_t tile_bytes) { return round16(kargs::attn_flash_tg_bytes(hd, kblock, tile_bytes)); }
static uint32_t rows_tg_bytes(uint32_t kblock, uint32_t hd) { return round16(kargs::attn_rows_tg_floats(hd, kblock) * 4); }

void encode_attention(Executor& ex, const backend::Tensor& out, const backend::Tensor& q, const backend::Tensor& k, const backend::Tensor& v,
                      int64_t heads, int64_t head_dim, float scale, const std::vector<backend::Segment>& segments,
                      backend::AttnProducts products) {
  const char* op = "attention";
  require_act(q, op, "q");
  for (auto [t, name] : {std::pair{&out, "out"}, std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    require_act_like(*t, q, op, name);
    const int64_t rows = (t == &out || t == &q) ? q.rows : k.rows;
    require(t->cols == heads * head_dim && t->rows == rows, op,
            std::string(name) + " is " + shape(*t) + ", expected [" + std::to_string(rows) + ", " + std::to_string(heads * head_dim) + "]");
  }
  const bool cross = q.rows != k.rows;  // queries against all of k: one segment, all of k's rows
  require(!cross || (segments.size() == 1 && segments[0].begin == 0 && segments[0].length == k.rows), op,
          "when q has " + std::to_string(q.rows) + " rows and k " + std::to_string(k.rows) + ", there must be one segment covering all of k");
  const int64_t max_hd = kargs::kAttnMaxHeadDim;
  require(heads > 0 && head_dim > 0 && head_dim <= max_hd, op, "head_dim " + std::to_string(head_dim) + " outside 1.." + std::to_string(max_hd));
  const uint32_t hd = uint32_t(head_dim);
  const bool flash = hd % 8 == 0;
  // f16 / bf16 storage (precision 'f16' / 'bf16'): K and V tiles in that type, unless the tower keeps attention's
  // products f32 (the _hs / _bs kernels: float tiles)
  const std::string letter = act_letter(q.dtype);
  const bool half = !letter.empty(), half_tiles = half && products != backend::AttnProducts::F32;
  auto bytes = [&](uint32_t kb) { return flash ? flash_tg_bytes(kb, hd, half_tiles ? 2 : 4) : rows_tg_bytes(kb, hd); };
  uint32_t kblock = kargs::kAttnBK;
  if (bytes(kblock) > ex.limits().max_tg_memory) kblock = kargs::kAttnBKSmall;
  const uint32_t tg = bytes(kblock);
  const std::string kernel = std::string(!flash ? "attention_segment" : hd == 64 ? "attention_flash_64" : hd == 72 ? "attention_flash_72" : hd == 80 ? "attention_flash_80" : "attention_flash") +
                             (!half ? "" : "_" + letter + (flash && !half_tiles ? "s" : ""));
  const uint32_t rows_per_group = flash ? kargs::kAttnBQ : kargs::kAttnRowsPerGroup;
  int64_t covered = 0;
  for (const backend::Segment& s : segments) {
    require(s.begin >= 0 && s.length >= 0 && s.begin + s.length <= k.rows, op,
            "segment [" + std::to_string(s.begin) + ", +" + std::to_string(s.length) + ") outside the " + std::to_string(k.rows) + " rows");
    covered += s.length;
    const int64_t q0 = cross ? 0 : s.begin, nq = cross ? q.rows : s.length;
    if (s.length == 0 || nq == 0) continue;
    kargs::Attention p{};
    p.n = u32(s.length, op, "segment length");
    p.nq = u32(nq, op, "query rows");
    p.heads = u32(heads, op, "heads");
    p.head_dim = hd;
    p.ldq = u32(q.ld, op, "q.ld");
    p.ldk = u32(k.ld, op, "k.ld");
    p.ldv = u32(v.ld, op, "v.ld");
    p.ldo = u32(out.ld, op, "out.ld");
    p.kblock = kblock;
    p.scale = scale;
    Dispatch d(kernel);
    d.bind(0, q.rows_view(q0, nq), Access::Read);
    d.bind(1, k.rows_view(s.begin, s.length), Access::Read);
    d.bind(2, v.rows_view(s.begin, s.length), Access::Read);
    d.bind(3, out.rows_view(q0, nq), Access::Write);
    d.args(4, p);
    d.tg(0, tg);
    d.threads = {kargs::kAttnThreads, 1, 1};
    d.groups = {div_up(p.nq, rows_per_group), p.heads, 1};
    submit(ex, d);
  }
  require(covered <= k.rows, op, "segments cover more rows than k has");
}

}  // namespace tessera::mtl
