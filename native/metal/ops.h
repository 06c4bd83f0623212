// The Metal op layer: one encode function per op of backend/backend.h. Each checks shapes (ERR_INVALID_ARGUMENT
// naming the op and the operand), picks the kernel variant and grid, fills Dispatches, validate()s them and
// records them on the executor. Never includes Metal or emulator headers: the same code drives the GPU and
// the emulator.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "metal/dispatch.h"

namespace tessera::mtl {

void encode_linear(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& w, const backend::LinearArgs& a);
void encode_layer_norm(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& gamma, const backend::Tensor& beta, float eps);
void encode_rms_norm(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* weight, int64_t group, float eps,
                     const backend::Tensor* residual);
void encode_add(Executor& ex, const backend::Tensor& y, const backend::Tensor& a, const backend::Tensor& b);
void encode_affine(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* sub, const backend::Tensor* mul, float scale,
                   float shift);
void encode_rope(Executor& ex, const backend::Tensor& x, const backend::Tensor& cos, const backend::Tensor& sin, int64_t heads, int64_t head_dim,
                 int64_t sections, const backend::HeadNorm* norm);
void encode_attention(Executor& ex, const backend::Tensor& out, const backend::Tensor& q, const backend::Tensor& k, const backend::Tensor& v,
                      int64_t heads, int64_t head_dim, float scale, const std::vector<backend::Segment>& segments,
                      backend::AttnProducts products = backend::AttnProducts::Bf16);
// Adds x's non-finite values to the uint32 counters [count, first flat index] at `offset` in `counts`
// (the caller sets them to 0 and 0xFFFFFFFF).
void encode_count_nonfinite(Executor& ex, const backend::Tensor& x, backend::Buffer* counts, uint64_t offset);
void encode_gather_sum(Executor& ex, const backend::Tensor& y, const backend::Tensor& table, backend::Buffer* lookup, int64_t taps, bool accumulate);

namespace detail {
// Shared by the encode functions.
[[noreturn]] void bad_arg(const char* op, const std::string& what);
void require(bool cond, const char* op, const std::string& what);
void require_tensor(const backend::Tensor& t, const char* op, const char* name);            // bound, non-negative, ld >= cols
void require_f32(const backend::Tensor& t, const char* op, const char* name);
// An activation operand: f32, or f16 / bf16 where the backend runs precision 'f16' / 'bf16'
// (backend::Backend::activation_dtype).
void require_act(const backend::Tensor& t, const char* op, const char* name);
// An activation operand that must have the same type as `like` (one kernel variant per type).
void require_act_like(const backend::Tensor& t, const backend::Tensor& like, const char* op, const char* name);
// The letter of an activation type in kernel names (metal/*.metal): "" for f32, "h" for f16, "b" for bf16.
const char* act_letter(DType t);
// The kernel of `base` for activations of t's type: base for f32, base + "_h" for f16, base + "_b" for bf16.
std::string act_kernel(const char* base, const backend::Tensor& t);
// The kernel of `base` for an x and a y that may differ in type, one of them f32: base + "_" + letter when they
// are alike, "_f" + y's letter for an f32 x, "_" + x's letter + "f" for an f32 y (metal/matmul.metal, norm.metal).
// f16 and bf16 together are refused, naming both.
std::string act_kernel(const char* base, const backend::Tensor& x, const backend::Tensor& y, const char* op);
void require_shape(const backend::Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name);
std::string shape(const backend::Tensor& t);
uint32_t u32(int64_t v, const char* op, const char* what);                              // range-checked
uint32_t div_up(uint64_t a, uint64_t b);
// Marks Write bindings that overlap a read binding of the same buffer as ReadWrite (in-place ops), then
// validates and records.
void submit(Executor& ex, Dispatch& d);
}  // namespace detail

}  // namespace tessera::mtl
