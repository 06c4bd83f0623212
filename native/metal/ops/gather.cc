// gather_sum: position-table lookups, merge permutations and pooling. The lookup buffer holds int32
// indices [rows, taps] then f32 weights [rows, taps]; indices are checked on the host (shared memory)
// before the dispatch, so a bad index is ERR_INVALID_ARGUMENT, never a GPU read out of bounds.
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

void encode_gather_sum(Executor& ex, const backend::Tensor& y, const backend::Tensor& table, backend::Buffer* lookup, int64_t taps, bool accumulate) {
  const char* op = "gather_sum";
  require_act(y, op, "y");
  require_tensor(table, op, "table");
  require(table.cols == y.cols, op, "table is " + shape(table) + " but y is " + shape(y));
  require(taps >= 0, op, "taps must be >= 0");
  const uint64_t entries = uint64_t(y.rows) * uint64_t(taps);
  require(lookup && lookup->host && lookup->bytes >= entries * 8, op,
          "lookup buffer must hold " + std::to_string(entries * 8) + " bytes (int32 indices then f32 weights)");
  const int32_t* idx = static_cast<const int32_t*>(lookup->host);
  for (uint64_t e = 0; e < entries; e++)
    require(idx[e] < table.rows, op, "index " + std::to_string(idx[e]) + " (row " + std::to_string(e / uint64_t(taps)) + ") is outside the table's " +
                                         std::to_string(table.rows) + " rows");
  if (y.rows == 0 || y.cols == 0) return;
  kargs::Gather p{};
  p.rows = u32(y.rows, op, "rows");
  p.cols = u32(y.cols, op, "cols");
  p.ldy = u32(y.ld, op, "y.ld");
  p.ldt = u32(table.ld, op, "table.ld");
  p.taps = u32(taps, op, "taps");
  p.table_type = uint32_t(table.dtype);
  p.accumulate = accumulate;
  p.table_rows = u32(table.rows, op, "table rows");
  Dispatch d(act_kernel("gather_sum", y));
  d.bind(0, y, accumulate ? Access::ReadWrite : Access::Write);
  d.bind_raw(1, table.buf, table.offset, table.rows ? (uint64_t(table.rows - 1) * table.ld + table.cols) * dtype_size(table.dtype) : 0,
             Access::Read, uint32_t(dtype_size(table.dtype)));
  d.bind_raw(2, lookup, 0, entries ? entries * 4 : 4, Access::Read, 4);
  d.bind_raw(3, lookup, entries * 4, entries ? entries * 4 : 4, Access::Read, 4);
  d.args(4, p);
  d.threads = {64, 1, 1};
  d.groups = {div_up(p.cols, 64), p.rows, 1};
  submit(ex, d);
}

}  // namespace tessera::mtl
