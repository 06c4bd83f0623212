// attention(): softmax(q kᵀ · scale) v per head and segment, as a tiled flash attention.
//
// Work items are (segment, head, query range), handed out dynamically. The kernel
// (attention_task_t in kernels_generic.inc; in precision 'bf16' on AMX, attention_amx.cc) packs the segment's keys (transposed, per key block)
// and values for its head into slot scratch, then for each block of query rows keeps the queries
// (pre-scaled), the running row max m, the running denominator l and the output accumulator O,
// and walks the keys a block at a time: S = Q Kᵀ, m' = max(m, rowmax S), P = exp(S - m'),
// O = O·exp(m - m') + P V, l = l·exp(m - m') + rowsum P. Memory per thread is
// O(segment rows x head_dim); nothing of size rows x rows exists. out may alias q: an item
// reads each query row before it writes that row, and no other item reads it.
// q (and out) may have fewer or more rows than k and v when there is one segment covering all of
// k (backend/backend.h): then every query row attends to all the keys (a tower's chunk of one image's
// query rows against that image's keys).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "cpu/denormals.h"
#include "cpu/ops.h"

namespace tessera::cpu {

namespace {

bool same_or_disjoint(const Tensor& a, const Tensor& b) {
  if (!backend::overlaps(a, b)) return true;
  if (a.offset == b.offset && a.ld == b.ld && a.cols == b.cols) return true;
  const size_t es = 4;  // q, k, v and out are f32 (checked by the caller)
  // Interleaved column views of one wider tensor (q, k, v inside qkv) never share an element.
  if (a.ld == b.ld) {
    size_t ra = a.offset % (size_t(a.ld) * es), rb = b.offset % (size_t(b.ld) * es);
    return ra + size_t(a.cols) * es <= rb || rb + size_t(b.cols) * es <= ra;
  }
  return false;
}
}  // namespace

void attention(Context& c, const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
               int64_t head_dim, float scale, const std::vector<Segment>& segments, backend::AttnProducts products) {
  const char* op = "attention";
  require_tensor(out, op, "out");
  require_tensor(q, op, "q");
  require_tensor(k, op, "k");
  require_tensor(v, op, "v");
  require(heads > 0 && head_dim > 0, op, "heads and head_dim must be positive");
  const int64_t width = heads * head_dim, rows = k.rows, nq = q.rows;
  for (const Tensor* t : {&out, &q, &k, &v}) {
    require(t->dtype == DType::F32, op, "q, k, v and out must be f32");
    require(t->rows == (t == &out || t == &q ? nq : rows) && t->cols == width, op,
            "q and out must be [" + std::to_string(nq) + ", " + std::to_string(width) + "], k and v [" +
                std::to_string(rows) + ", " + std::to_string(width) + "]");
  }
  // Queries against keys of another row count: one segment, all of k (backend/backend.h).
  const bool cross = nq != rows;
  require(!cross || (segments.size() == 1 && segments[0].begin == 0 && segments[0].length == rows), op,
          "when q has " + std::to_string(nq) + " rows and k " + std::to_string(rows) +
              ", there must be one segment covering all of k");
  require(same_or_disjoint(out, k) && same_or_disjoint(out, v) && !(out.buf == k.buf && out.offset == k.offset) &&
              !(out.buf == v.buf && out.offset == v.offset),
          op, "out may alias q but must not overlap k or v");
  for (const Segment& s : segments)
    require(s.begin >= 0 && s.length >= 0 && s.begin + s.length <= rows, op,
            "segment [" + std::to_string(s.begin) + ", +" + std::to_string(s.length) + ") is outside the " +
                std::to_string(rows) + " rows");
  // A segment's query rows: its own rows, or all of q when crossing.
  auto q_begin = [&](const Segment& s) { return cross ? int64_t(0) : s.begin; };
  auto q_rows = [&](const Segment& s) { return cross ? nq : s.length; };

  // Work items: (segment, head, query range). One range per segment and head when there are
  // enough of them to keep every thread busy; otherwise the queries are split further (each
  // piece then packs the segment's keys and values itself).
  struct Item {
    int64_t seg, head, q0, nq;
  };
  std::vector<Item> items;
  const int T = c.pool.size();
  int64_t pairs = 0;
  for (const Segment& s : segments) pairs += s.length > 0 && q_rows(s) > 0 ? heads : 0;
  const int64_t split = pairs >= 4 * T ? 1 : (4 * T + pairs - 1) / std::max<int64_t>(pairs, 1);
  int64_t max_nk = 0;
  for (size_t si = 0; si < segments.size(); ++si) {
    const Segment& s = segments[si];
    const int64_t sq = q_rows(s);
    if (s.length == 0 || sq == 0) continue;
    max_nk = std::max(max_nk, s.length);
    const int64_t piece = std::max<int64_t>(16, (sq + split - 1) / split);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t q0 = 0; q0 < sq; q0 += piece) items.push_back({int64_t(si), h, q0, std::min(piece, sq - q0)});
  }
  if (items.empty()) return;
  // Longest first, so a big segment does not start last.
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    return segments[size_t(a.seg)].length * a.nq > segments[size_t(b.seg)].length * b.nq;
  });
  std::atomic<size_t> next{0};
  const AttnKernel& kernel = attention_kernel(c, products);
  const size_t scratch = kernel.scratch(max_nk, head_dim);
  const int tasks = int(std::min<size_t>(size_t(T), items.size()));
  c.pool.run_tasks(size_t(tasks), [&](size_t slot) {
    DenormalGuard ftz;
    float* buf = c.ws.slot(int(slot), Scratch::Attn, scratch);
    for (size_t it; (it = next.fetch_add(1)) < items.size();) {
      const Item& w = items[it];
      const Segment& s = segments[size_t(w.seg)];
      const int64_t col = w.head * head_dim;
      AttnJob job;
      job.q = q.host_ptr<float>(q_begin(s) + w.q0, col);
      job.k = k.host_ptr<float>(s.begin, col);
      job.v = v.host_ptr<float>(s.begin, col);
      job.out = out.host_ptr<float>(q_begin(s) + w.q0, col);
      job.ldq = q.ld, job.ldk = k.ld, job.ldv = v.ld, job.ldo = out.ld;
      job.nq = w.nq, job.nk = s.length, job.hd = head_dim;
      job.scale = scale;
      kernel.run(job, buf);
    }
  });
}

}  // namespace tessera::cpu
