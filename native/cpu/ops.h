// The CPU implementations of backend/backend.h's ops, one driver per op family (gemm.cc,
// attention.cc, norms.cc, elementwise.cc). cpu_backend.cc validates nothing twice: each driver
// checks its own shapes and names the op in its errors.
#pragma once
#include <vector>

#include "common/thread_pool.h"
#include "cpu/kernels.h"
#include "cpu/workspace.h"
#include "backend/backend.h"

namespace tessera::cpu {

struct Context {
  ThreadPool& pool;
  const Kernels& k;
  Workspace& ws;
  bool bf16 = false;  // precision 'bf16' and k.bf16 set: linears with bf16 weights run k.bf16
};

// The attention kernel a context runs for a call (attention.cc runs it, the backend's workspace
// prediction and query block ask it): the level's bf16 attention in precision 'bf16' where it has
// one and the call allows it, else f32.
inline const AttnKernel& attention_kernel(const Context& c, backend::AttnProducts products) {
  return c.bf16 && c.k.bf16_attention && products == backend::AttnProducts::Bf16 ? *c.k.bf16_attention : c.k.attention;
}

using backend::Act;
using backend::LinearArgs;
using backend::Segment;
using backend::Tensor;

void linear(Context& c, const Tensor& y, const Tensor& x, const Tensor& w, const LinearArgs& args);
// Backend::pack_weight: rearranges w's whole panels of nr rows in place into linear()'s [K][nr].
bool pack_weight(Context& c, Tensor& w);
void attention(Context& c, const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
               int64_t head_dim, float scale, const std::vector<Segment>& segments, backend::AttnProducts products);
void layer_norm(Context& c, const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
void rms_norm(Context& c, const Tensor& y, const Tensor& x, const Tensor* weight, int64_t group, float eps,
              const Tensor* residual);
void add(Context& c, const Tensor& y, const Tensor& a, const Tensor& b);
void affine(Context& c, const Tensor& y, const Tensor& x, const Tensor* sub, const Tensor* mul, float scale,
            float shift);
void rope(Context& c, const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, int64_t head_dim,
          int64_t sections, const backend::HeadNorm* norm);
void gather_sum(Context& c, const Tensor& y, const Tensor& table, const void* lookup, size_t lookup_bytes,
                int64_t taps, bool accumulate);
int64_t count_nonfinite(Context& c, const Tensor& x, int64_t* first);

// The workspace a linear of [M, K] x [N, K]ᵀ takes (the formula gemm.cc allocates by): shared
// packed-weight floats, and per task (tasks of them) packed-A and accumulator floats.
struct LinearScratch {
  size_t shared_floats = 0, pack_a_floats = 0, accum_floats = 0;
  int tasks = 0;
};
// In precision 'bf16', the larger of the f32 and the bf16 path's (a tower's linears may take either).
LinearScratch linear_scratch(const Context& c, int threads, int64_t M, int64_t K, int64_t N);

// ---- helpers shared by the drivers (tensor_util.cc)
// Throws ERR_INVALID_ARGUMENT "<op>: <what>" unless cond.
void require(bool cond, const char* op, const std::string& what);
// Checks that t is a host-visible tensor with sane geometry (ld >= cols, inside its buffer).
void require_tensor(const Tensor& t, const char* op, const char* name);
// Row r of t as f32: t's own memory when it is f32, else widened into tmp (t.cols floats).
const float* row_f32(const Tensor& t, int64_t r, float* tmp);
// A [1, n] parameter vector (bias, gamma, ...) widened to f32 into out (resized).
void vector_f32(const Tensor& t, int64_t n, const char* op, const char* name, std::vector<float>& out);

}  // namespace tessera::cpu
