// attention(): softmax(q kᵀ · scale) v per head and segment, as a tiled flash attention.
//
// Work items are (segment, head, block of kBq query rows), handed out dynamically. An item keeps
// its queries (pre-scaled), the running row max m, the running denominator l and the output
// accumulator O in slot scratch (kBq x head_dim), and walks the segment's keys kBk at a time:
// S = Q Kᵀ for the block, m' = max(m, rowmax S), P = exp(S - m'), O = O·exp(m - m') + P V,
// l = l·exp(m - m') + rowsum P. Memory per thread is O(kBq x (head_dim + kBk)); nothing of size
// rows x rows exists. out may alias q (an item reads only its own query rows, before writing).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "cpu/ops.h"

namespace tessera::cpu {

namespace {
constexpr int64_t kBq = 32, kBk = 64;

bool same_or_disjoint(const Tensor& a, const Tensor& b) {
  if (a.buf != b.buf || a.rows == 0 || b.rows == 0) return true;
  if (a.offset == b.offset && a.ld == b.ld && a.cols == b.cols) return true;
  size_t es = 4;
  size_t a0 = a.offset, a1 = a.offset + (size_t(a.rows - 1) * size_t(a.ld) + size_t(a.cols)) * es;
  size_t b0 = b.offset, b1 = b.offset + (size_t(b.rows - 1) * size_t(b.ld) + size_t(b.cols)) * es;
  if (a1 <= b0 || b1 <= a0) return true;
  // Interleaved column views of one wider tensor (q, k, v inside qkv) never share an element.
  if (a.ld == b.ld) {
    size_t ra = a.offset % (size_t(a.ld) * es), rb = b.offset % (size_t(b.ld) * es);
    return ra + size_t(a.cols) * es <= rb || rb + size_t(b.cols) * es <= ra;
  }
  return false;
}
}  // namespace

void attention(Context& c, const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
               int64_t head_dim, float scale, const std::vector<Segment>& segments) {
  const char* op = "attention";
  require_tensor(out, op, "out");
  require_tensor(q, op, "q");
  require_tensor(k, op, "k");
  require_tensor(v, op, "v");
  require(heads > 0 && head_dim > 0, op, "heads and head_dim must be positive");
  const int64_t width = heads * head_dim, rows = q.rows;
  for (const Tensor* t : {&out, &q, &k, &v}) {
    require(t->dtype == DType::F32, op, "q, k, v and out must be f32");
    require(t->rows == rows && t->cols == width, op,
            "q, k, v and out must all be [" + std::to_string(rows) + ", " + std::to_string(width) + "]");
  }
  require(same_or_disjoint(out, k) && same_or_disjoint(out, v) && !(out.buf == k.buf && out.offset == k.offset) &&
              !(out.buf == v.buf && out.offset == v.offset),
          op, "out may alias q but must not overlap k or v");
  for (const Segment& s : segments)
    require(s.begin >= 0 && s.length >= 0 && s.begin + s.length <= rows, op,
            "segment [" + std::to_string(s.begin) + ", +" + std::to_string(s.length) + ") is outside the " +
                std::to_string(rows) + " rows");

  // Items: for each segment and head, ceil(length / kBq) query blocks.
  std::vector<int64_t> first_item;  // per segment, index of its first item
  int64_t items = 0;
  for (const Segment& s : segments) {
    first_item.push_back(items);
    items += heads * ((s.length + kBq - 1) / kBq);
  }
  if (items == 0) return;
  std::atomic<int64_t> next{0};
  const int64_t hd = head_dim;
  const int tasks = int(std::min<int64_t>(c.pool.size(), items));

  c.pool.run_tasks(size_t(tasks), [&](size_t slot) {
    float* scratch = c.ws.slot(int(slot), Scratch::Attn, size_t(kBq * (2 * hd + kBk + 2)));
    float* Q = scratch;          // [kBq][hd]
    float* O = Q + kBq * hd;     // [kBq][hd]
    float* S = O + kBq * hd;     // [kBq][kBk]
    float* m = S + kBq * kBk;    // [kBq]
    float* l = m + kBq;          // [kBq]
    for (int64_t it; (it = next.fetch_add(1)) < items;) {
      size_t si = size_t(std::upper_bound(first_item.begin(), first_item.end(), it) - first_item.begin()) - 1;
      const Segment& seg = segments[si];
      const int64_t qblocks = (seg.length + kBq - 1) / kBq;
      const int64_t local = it - first_item[si], h = local / qblocks, qb = local % qblocks;
      const int64_t r0 = seg.begin + qb * kBq, nq = std::min(kBq, seg.begin + seg.length - r0);
      const int64_t col = h * hd;
      for (int64_t i = 0; i < nq; ++i) {
        const float* src = q.host_ptr<float>(r0 + i, col);
        for (int64_t d = 0; d < hd; ++d) Q[i * hd + d] = src[d] * scale;
        std::fill(O + i * hd, O + (i + 1) * hd, 0.0f);
        m[i] = -INFINITY;
        l[i] = 0.0f;
      }
      for (int64_t j0 = seg.begin; j0 < seg.begin + seg.length; j0 += kBk) {
        const int64_t nk = std::min(kBk, seg.begin + seg.length - j0);
        for (int64_t i = 0; i < nq; ++i) {
          const float* qi = Q + i * hd;
          float* si_row = S + i * kBk;
          float mx = m[i];
          for (int64_t j = 0; j < nk; ++j) {
            const float* kj = k.host_ptr<float>(j0 + j, col);
            float s = 0.0f;
            for (int64_t d = 0; d < hd; ++d) s += qi[d] * kj[d];
            si_row[j] = s;
            mx = std::max(mx, s);
          }
          const float corr = std::exp(m[i] - mx);  // exp(-inf) = 0 on the first block
          float sum = 0.0f;
          for (int64_t j = 0; j < nk; ++j) {
            float p = std::exp(si_row[j] - mx);
            si_row[j] = p;
            sum += p;
          }
          l[i] = l[i] * corr + sum;
          m[i] = mx;
          float* oi = O + i * hd;
          for (int64_t d = 0; d < hd; ++d) oi[d] *= corr;
          for (int64_t j = 0; j < nk; ++j) {
            const float p = si_row[j];
            const float* vj = v.host_ptr<float>(j0 + j, col);
            for (int64_t d = 0; d < hd; ++d) oi[d] += p * vj[d];
          }
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        float* dst = out.host_ptr<float>(r0 + i, col);
        const float inv = 1.0f / l[i];
        for (int64_t d = 0; d < hd; ++d) dst[d] = O[i * hd + d] * inv;
      }
    }
  });
}

}  // namespace tessera::cpu
