// The Metal op layer + MSL kernels on the emulator (`metal-emulated`), table-driven against the CPU backend:
// odd sizes around the kernels' tiles (31/32/33), ragged tails, every weight dtype, strided views, in-place
// use, each activation, attention segments and head sizes. Every case runs four times (forward/ff,
// reverse/ff, shuffled:1/ff, shuffled:2/55) and the four outputs must be bit-identical.
// Runs only with TESSERA_METAL_OPS=1 (test/metal-ops.test.ts sets it when the emulator library was built:
// it needs clang >= 15); without the library, that test says why it is skipped.
// TESSERA_METAL_OPS=fast: the same four runs on the emulator library whose kernels were compiled with -ffast-math
// (TESSERA_MSLEMU_LIB=build/mslemu/fastmath/...; test/metal-ops.test.ts), against the CPU at the GPU's tolerance.
// TESSERA_METAL_OPS=metal (`npm run test:metal` on a Mac) runs the same cases on the real GPU instead: each
// case twice (bit-identical: no kernel uses float atomics), against the CPU at the Metal tolerance of docs/design.md#numerics.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/cpu_backend.h"
#include "harness.h"
#include "metal/device.h"
#include "metal/emu_executor.h"
#include "metal/metal_backend.h"
#include "models_test_util.h"

using tessera::DType;
using namespace tessera::backend;
namespace mtl = tessera::mtl;

namespace {

bool on_gpu() {
  const char* e = std::getenv("TESSERA_METAL_OPS");
  return e && std::string(e) == "metal";
}

// Fast-math numerics (the GPU, or the emulator's fast-math kernels): compared at kGpuTol.
bool fast_math() {
  const char* e = std::getenv("TESSERA_METAL_OPS");
  return e && (std::string(e) == "metal" || std::string(e) == "fast");
}

bool enabled() {
  const char* e = std::getenv("TESSERA_METAL_OPS");
  if (!e || (std::string(e) != "1" && std::string(e) != "fast" && std::string(e) != "metal")) return false;
  if (on_gpu()) return true;
  std::string why;
  if (!mtl::emulator_available(&why)) harness::failed(__FILE__, __LINE__, std::string("TESSERA_METAL_OPS=") + e + " but " + why);
  return true;
}

// Emulator options by field (EmuOptions has more, defaulted, fields).
mtl::EmuOptions emu(int schedule, uint64_t seed, uint8_t poison, uint32_t max_threads = 0) {
  mtl::EmuOptions o;
  o.schedule = schedule;
  o.seed = seed;
  o.poison = poison;
  o.workers = 1;
  o.max_threads = max_threads;
  return o;
}

constexpr double kGpuTol = 5e-3;  // docs/design.md#numerics: fast-math numerics on the GPU

struct HostMat {
  int64_t rows = 0, cols = 0, ld = 0;
  DType dtype = DType::F32;
  std::vector<char> bytes;  // rows * ld elements
};

HostMat make(std::mt19937& g, int64_t rows, int64_t cols, DType dt = DType::F32, int64_t pad = 0, float lo = -1, float hi = 1) {
  HostMat m{rows, cols, cols + pad, dt, {}};
  const size_t es = tessera::dtype_size(dt);
  m.bytes.assign(size_t(std::max<int64_t>(rows * m.ld, 1)) * es, 0);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < rows * m.ld; i++) {
    const float x = u(g);
    char* p = m.bytes.data() + size_t(i) * es;
    if (dt == DType::F32) std::memcpy(p, &x, 4);
    else {
      const uint16_t h = dt == DType::BF16 ? tessera::f32_to_bf16(x) : tessera::f32_to_f16(x);
      std::memcpy(p, &h, 2);
    }
  }
  return m;
}
HostMat raw(const void* data, size_t n) {
  HostMat m{1, int64_t((n + 3) / 4), int64_t((n + 3) / 4), DType::F32, {}};
  m.bytes.assign(size_t(m.cols) * 4, 0);
  std::memcpy(m.bytes.data(), data, n);
  return m;
}

struct Case {
  std::string name;
  std::vector<HostMat> in;
  std::function<void(Backend&, std::vector<Tensor>&)> op;
  int out;            // the tensor compared
  double tol = 2e-5;  // max |metal - cpu| / max |cpu|
  // Precisions 'f16' and 'bf16' (docs/metal.md#half-precision): the inputs that are activations. When set,
  // check() runs the case again on a Metal backend in f16 and in bf16 with these as half / bfloat tensors,
  // against the CPU given the same values (rounded to that type) as f32, at reduced_tol().
  std::vector<int> acts;
};

// Half storage rounds each activation (2^-11 relative) and the GEMM's W to half: a case's output moves by a few
// units of half's last place of its largest value. bfloat keeps 8 significant bits to half's 11: 8 times that.
double reduced_tol(DType act) { return act == DType::BF16 ? 1.6e-2 : 2e-3; }

// m's values rounded to `to` (f16 or bf16): stored as `to`, or as f32 holding the rounded values.
HostMat through(const HostMat& m, DType to, bool store) {
  if (m.dtype != DType::F32) return m;
  HostMat h{m.rows, m.cols, m.ld, store ? to : DType::F32, {}};
  const size_t n = m.bytes.size() / 4;
  h.bytes.assign(n * (store ? 2 : 4), 0);
  for (size_t i = 0; i < n; i++) {
    float x;
    std::memcpy(&x, m.bytes.data() + i * 4, 4);
    const uint16_t b = to == DType::BF16 ? tessera::f32_to_bf16(x) : tessera::f32_to_f16(x);
    if (store) std::memcpy(h.bytes.data() + i * 2, &b, 2);
    else {
      float r;
      tessera::widen_to_f32(&b, to, &r, 1);
      std::memcpy(h.bytes.data() + i * 4, &r, 4);
    }
  }
  return h;
}

mtl::Precision precision_of(DType act) {
  return act == DType::F16 ? mtl::Precision::F16 : act == DType::BF16 ? mtl::Precision::Bf16 : mtl::Precision::F32;
}

std::vector<float> run_on(Backend& b, const Case& c) {
  std::vector<Buffer*> bufs;
  std::vector<Tensor> ts;
  for (const HostMat& m : c.in) {
    Buffer* buf = b.alloc(m.bytes.size());
    b.upload(buf, 0, m.bytes.data(), m.bytes.size());
    bufs.push_back(buf);
    ts.push_back(make_tensor(buf, 0, m.dtype, m.rows, m.ld).cols_view(0, m.cols));
  }
  c.op(b, ts);
  b.submit(nullptr);
  const Tensor& o = ts[size_t(c.out)];
  std::vector<float> out(size_t(o.rows * o.cols));
  b.download(out.data(), o);
  b.finish();
  for (Buffer* buf : bufs) b.release(buf);
  return out;
}

void check_one(const Case& c, DType act);
void check(const Case& c) {
  check_one(c, DType::F32);
  if (!c.acts.empty())
    for (DType act : {DType::F16, DType::BF16}) check_one(c, act);
}

// act: what the case's activations are stored in (F32, or F16 / BF16 for the reduced-precision kernels).
void check_one(const Case& c0, DType act) {
  Case c = c0, cref = c0;
  if (act != DType::F32) {
    c.name += std::string(" [") + tessera::dtype_name(act) + "]";
    for (int i : c0.acts) {
      c.in[size_t(i)] = through(c0.in[size_t(i)], act, true);
      cref.in[size_t(i)] = through(c0.in[size_t(i)], act, false);
    }
    c.tol = std::max(c0.tol, reduced_tol(act));
  }
  auto cpu = tessera::cpu::make_cpu_backend(1);
  const std::vector<float> ref = run_on(*cpu, cref);
  const mtl::EmuOptions runs[4] = {emu(0, 0, 0xFF), emu(1, 0, 0xFF), emu(2, 1, 0xFF), emu(2, 2, 0x55)};
  const char* names[4] = {"forward/ff", "reverse/ff", "shuffled:1/ff", "shuffled:2/55"};
  const char* gpu_names[4] = {"GPU run 1", "GPU run 2", "", ""};
  const bool gpu = on_gpu();
  if (gpu) std::copy(gpu_names, gpu_names + 4, names);
  std::vector<float> first;
  // The f16 and bf16 kernels instantiate the f32 kernels' templates: two schedules (in order, and shuffled with
  // the other poison) check their staging; the four run for f32.
  const std::vector<int> order = gpu ? std::vector<int>{0, 1} : act == DType::F32 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 3};
  for (int r : order) {
    auto mb = gpu ? mtl::make_metal_backend("metal", precision_of(act))
                  : mtl::make_metal_backend(mtl::make_emu_executor(runs[r]), "metal-emulated", precision_of(act));
    if (act == DType::BF16 && std::string(mb->precision()) != "bf16") {  // a Mac before macOS 14: no MSL 3.1 bfloat
      std::printf("     %-70s skipped: this GPU's backend has no bfloat (precision %s)\n", c.name.c_str(), mb->precision());
      return;
    }
    std::vector<float> got;
    try {
      got = run_on(*mb, c);
    } catch (const tessera::Error& e) {
      harness::failed(__FILE__, __LINE__, c.name + " under " + names[r] + ": " + e.what());
    }
    if (r == 0) first = got;
    else
      EXPECT_MSG(got.size() == first.size() && std::memcmp(got.data(), first.data(), got.size() * 4) == 0,
                 c.name << ": output under " << names[r] << " differs from forward/ff (a race or a read of unwritten memory)");
  }
  double err = 0, mx = 0;
  size_t worst = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    const double e = std::fabs(double(first[i]) - double(ref[i]));
    if (!(e <= err)) err = e, worst = i;
    mx = std::max(mx, std::fabs(double(ref[i])));
  }
  const double tol = fast_math() ? std::max(c.tol, kGpuTol) : c.tol;
  std::printf("     %-70s max rel err %.3g\n", c.name.c_str(), err / std::max(mx, 1e-30));
  EXPECT_MSG(err <= tol * std::max(mx, 1e-30), c.name << ": max |metal - cpu| " << err << " at " << worst << " (metal " << first[worst] << ", cpu "
                                                        << ref[worst] << "), max |cpu| " << mx << ", tol " << tol);
}

const char* dn(DType d) { return tessera::dtype_name(d); }

}  // namespace

TEST("metal: linear vs cpu (matmul + matvec paths, 31/32/33 and 63/64/65 tails, f32/f16/bf16 weights, bias, act, mul, residual, clamps, strides)") {
  if (!enabled()) return;
  std::mt19937 g(11);
  struct S {
    int64_t m, k, n;
  };
  // the last three around the 64 x 64 tile: inside tiles on the path without bounds checks next to edge
  // tiles, and K not a multiple of kGemmBK (every tile on the checked path)
  const S shapes[] = {{1, 33, 31}, {3, 32, 33}, {4, 65, 17}, {5, 31, 32}, {31, 33, 32}, {32, 32, 33}, {33, 31, 31}, {40, 96, 70},
                      {64, 64, 64}, {130, 48, 136}, {128, 40, 65}};
  int variant = 0;
  for (const S& s : shapes)
    for (DType wd : {DType::F32, DType::F16, DType::BF16}) {
      ++variant;
      const Act act = Act((variant + 3 * (variant / 6)) % 5);  // shifted every 6: each with and without bias, mul, residual
      const bool bias = variant % 2 == 0, res = variant % 4 != 1, alias = variant % 4 == 2, clamps = variant % 5 == 0;
      // the GEGLU multiplier (Gemma 4's up linear): a strided tensor of its own, or y itself
      const bool mul = variant % 3 != 2, mul_alias = mul && variant % 4 >= 2;
      const DType bd = variant % 3 == 0 ? DType::BF16 : DType::F32;
      Case c;
      c.name = "linear " + std::to_string(s.m) + "x" + std::to_string(s.k) + "->" + std::to_string(s.n) + " w=" + dn(wd) + " act=" + std::to_string(int(act)) +
               (bias ? " bias" : "") + (mul ? (mul_alias ? " mul=y" : " mul") : "") + (res ? (alias ? " residual=y" : " residual") : "") +
               (clamps ? " clamps" : "");
      c.in = {make(g, s.m, s.k, DType::F32, variant % 3), make(g, s.n, s.k, wd), make(g, 1, s.n, bd), make(g, s.m, s.n), make(g, s.m, s.n, DType::F32, variant % 2),
              make(g, s.m, s.n, DType::F32, 1 + variant % 2, 0.5f, 1.5f)};
      c.out = 4;
      c.op = [=](Backend& b, std::vector<Tensor>& t) {
        LinearArgs a;
        a.act = act;
        if (bias) a.bias = &t[2];
        if (mul) a.mul = mul_alias ? &t[4] : &t[5];
        if (res) a.residual = alias ? &t[4] : &t[3];
        if (clamps) a.in_min = -0.5f, a.in_max = 0.7f, a.out_min = -0.9f, a.out_max = 1.1f;
        b.linear(t[4], t[0], t[1], a);
      };
      c.tol = wd == DType::F32 ? 2e-5 : 5e-5;
      // f16: x half (the _h kernels), x f32 (the _fh kernels: the patch embedding's pixels), or x half into an
      // f32 y, mul and residual (the _hf kernels: an output a tower keeps f32), spread over shapes and weights
      const std::vector<int> acts[3] = {{0, 3, 4, 5}, {3, 4, 5}, {0}};
      c.acts = acts[(variant + variant / 3) % 3];
      check(c);
    }
}

TEST("metal: linear's QuickGELU and SiLU vs cpu where e^-z overflows (x·W up to ±200; matvec and matmul paths)") {
  if (!enabled()) return;
  std::mt19937 g(13);
  for (Act act : {Act::QuickGelu, Act::Silu})
    for (int64_t rows : {3, 40}) {
      Case c;
      c.name = std::string("linear ") + (act == Act::Silu ? "silu" : "quick_gelu") + " rows=" + std::to_string(rows) + " |x·W| to 200";
      c.in = {make(g, rows, 2, DType::F32, 0, -100, 100), make(g, 33, 2), make(g, 1, 33), make(g, rows, 33)};
      c.out = 3;
      c.op = [=](Backend& b, std::vector<Tensor>& t) {
        LinearArgs a;
        a.act = act;
        a.bias = &t[2];
        b.linear(t[3], t[0], t[1], a);
      };
      check(c);
    }
}

TEST("metal: layer_norm and rms_norm vs cpu (row and per-head groups, weight dtypes, weightless, in place, f32 x into an f16 or bf16 y)") {
  if (!enabled()) return;
  std::mt19937 g(12);
  for (int64_t cols : {31, 32, 33, 300})
    for (DType wd : {DType::F32, DType::F16, DType::BF16}) {
      Case c;
      c.name = "layer_norm cols=" + std::to_string(cols) + " w=" + dn(wd);
      c.in = {make(g, 5, cols, DType::F32, 3, -2, 3), make(g, 1, cols, wd, 0, 0.5f, 1.5f), make(g, 1, cols, wd), make(g, 5, cols)};
      c.out = 3;
      c.op = [](Backend& b, std::vector<Tensor>& t) { b.layer_norm(t[3], t[0], t[1], t[2], 1e-6f); };
      c.acts = {0, 3};
      check(c);
      Case r;
      r.name = "rms_norm row cols=" + std::to_string(cols) + " w=" + dn(wd) + " in place";
      r.in = {make(g, 4, cols, DType::F32, 0, -2, 3), make(g, 1, cols, wd, 0, 0.5f, 1.5f)};
      r.out = 0;
      r.op = [](Backend& b, std::vector<Tensor>& t) { b.rms_norm(t[0], t[0], &t[1], t[0].cols, 1e-6f, nullptr); };
      r.acts = {0};
      check(r);
      // an f32 residual stream normed into a half or bfloat y (the _fh and _fb kernels: backend::ActRange::Stream)
      for (int rms = 0; rms < 2; rms++) {
        Case m;
        m.name = std::string(rms ? "rms_norm" : "layer_norm") + " f32 x -> y cols=" + std::to_string(cols) + " w=" + dn(wd);
        m.in = {make(g, 5, cols, DType::F32, 2, -2, 3), make(g, 1, cols, wd, 0, 0.5f, 1.5f), make(g, 1, cols, wd), make(g, 5, cols)};
        m.out = 3;
        m.op = [rms](Backend& b, std::vector<Tensor>& t) {
          if (rms) b.rms_norm(t[3], t[0], &t[1], t[0].cols, 1e-6f, nullptr);
          else b.layer_norm(t[3], t[0], t[1], t[2], 1e-6f);
        };
        m.acts = {3};
        check(m);
      }
    }
  for (int64_t group : {16, 64, 72})
    for (int weighted = 0; weighted < 2; weighted++) {
      Case c;
      c.name = "rms_norm group=" + std::to_string(group) + (weighted ? " weighted bf16" : " weightless");
      c.in = {make(g, 7, group * 5, DType::F32, 2, -2, 2), make(g, 1, group, DType::BF16, 0, 0.5f, 1.5f), make(g, 7, group * 5)};
      c.out = 2;
      c.op = [weighted](Backend& b, std::vector<Tensor>& t) { b.rms_norm(t[2], t[0], weighted ? &t[1] : nullptr, t[1].cols, 1e-6f, nullptr); };
      c.acts = {0, 2};
      check(c);
    }
  // a residual added last (Gemma 4's post-norms x += N(h)): strided and apart, or the output itself
  for (int64_t group : {300, 72})
    for (int alias = 0; alias < 2; alias++) {
      const int64_t cols = group == 300 ? 300 : 5 * group;  // the row kernel, then the per-group one
      Case c;
      c.name = "rms_norm group=" + std::to_string(group) + " cols=" + std::to_string(cols) + " + residual" + (alias ? "=y" : " (strided)");
      c.in = {make(g, 6, cols, DType::F32, 1, -2, 2), make(g, 1, group, DType::BF16, 0, 0.5f, 1.5f), make(g, 6, cols, DType::F32, 3, -3, 3),
              make(g, 6, cols)};
      c.out = alias ? 2 : 3;
      c.op = [alias](Backend& b, std::vector<Tensor>& t) { b.rms_norm(t[alias ? 2 : 3], t[0], &t[1], t[1].cols, 1e-6f, &t[2]); };
      c.acts = {0, 2, 3};
      check(c);
    }
}

TEST("metal: element-wise ops vs cpu (add, affine with any-dtype vectors and a scalar shift)") {
  if (!enabled()) return;
  std::mt19937 g(13);
  {
    Case c;
    c.name = "add (strided b, y = a)";
    c.in = {make(g, 32, 33), make(g, 32, 33, DType::F32, 5)};
    c.out = 0;
    c.op = [](Backend& b, std::vector<Tensor>& t) { b.add(t[0], t[0], t[1]); };
    c.acts = {0, 1};
    check(c);
  }
  for (DType sd : {DType::F32, DType::F16, DType::BF16})
    for (int mask = 0; mask < 4; mask++) {
      Case c;
      c.name = std::string("affine sub/mul ") + dn(sd) + " mask " + std::to_string(mask);
      c.in = {make(g, 9, 31), make(g, 1, 31, sd), make(g, 1, 31, sd, 0, 0.5f, 2.0f), make(g, 9, 31)};
      c.out = 3;
      c.op = [mask](Backend& b, std::vector<Tensor>& t) {
        b.affine(t[3], t[0], mask & 1 ? &t[1] : nullptr, mask & 2 ? &t[2] : nullptr, 1.75f, mask == 0 ? 0.5f : 0.0f);
      };
      c.acts = {0, 3};
      check(c);
    }
}

TEST("metal: rope vs cpu (Qwen 1 section, Gemma 2 sections; head_dim 16, 64, 72; strided q inside qkv)") {
  if (!enabled()) return;
  std::mt19937 g(14);
  for (int64_t hd : {16, 64, 72})
    for (int64_t sections : {1, 2}) {
      Case c;
      c.name = "rope hd=" + std::to_string(hd) + " sections=" + std::to_string(sections);
      const int64_t heads = 3, rows = 33;
      c.in = {make(g, rows, 3 * heads * hd), make(g, rows, hd), make(g, rows, hd)};
      c.out = 0;
      c.op = [=](Backend& b, std::vector<Tensor>& t) { b.rope(t[0].cols_view(heads * hd, heads * hd), t[1], t[2], heads, hd, sections, nullptr); };
      c.acts = {0};  // cos and sin stay f32
      check(c);
    }
  // each head RMS-normed first (Gemma 4's q and k): weighted (f32, bf16) and weightless; 9 heads: more heads
  // than the kernel's 8 simdgroups, so a simdgroup takes a second head
  for (int64_t hd : {16, 64, 72, 80})
    for (int weight = 0; weight < 3; weight++) {
      const int64_t sections = hd == 80 ? 1 : 2, heads = hd == 72 ? 9 : 3, rows = 17;
      Case c;
      c.name = "rope+norm hd=" + std::to_string(hd) + " sections=" + std::to_string(sections) + " heads=" + std::to_string(heads) +
               (weight == 0 ? " weightless" : weight == 1 ? " f32 weight" : " bf16 weight");
      c.in = {make(g, rows, 2 * heads * hd, DType::F32, 1, -3, 3), make(g, rows, hd), make(g, rows, hd),
              make(g, 1, hd, weight == 2 ? DType::BF16 : DType::F32, 0, 0.5f, 1.5f)};
      c.out = 0;
      c.op = [=](Backend& b, std::vector<Tensor>& t) {
        const HeadNorm norm{weight ? &t[3] : nullptr, 1e-6f};
        b.rope(t[0].cols_view(heads * hd, heads * hd), t[1], t[2], heads, hd, sections, &norm);
      };
      c.acts = {0};
      check(c);
    }
}

TEST("metal: attention vs cpu (head_dim 12/16/64/72/80/96/128, segments incl. 1 row and ragged tiles, q/k/v inside qkv)") {
  if (!enabled()) return;
  std::mt19937 g(15);
  struct A {
    int64_t heads, hd;
    std::vector<Segment> segs;
  };
  // flash kernels: 64, 72, 80 (their own), 16, 96 and 128 (the generic one; 96 and 128 with 16-key tiles);
  // 12: the row kernel. 100 rows: several query blocks and key tiles, both ragged.
  const A cases[] = {{4, 16, {{0, 31}, {31, 33}}}, {2, 64, {{0, 1}, {1, 40}}}, {2, 72, {{0, 64}}}, {1, 128, {{0, 20}, {20, 17}}},
                     {2, 80, {{0, 100}}}, {1, 96, {{0, 45}}}, {3, 12, {{0, 33}}}};
  // f16: q, k, v and out half; half K and V tiles (the _h kernels), and with AttnProducts::F32 float tiles (_hs)
  for (const A& a : cases)
    for (AttnProducts products : {AttnProducts::Bf16, AttnProducts::F32}) {
    int64_t rows = 0;
    for (auto& s : a.segs) rows = std::max(rows, s.begin + s.length);
    Case c;
    c.name = "attention heads=" + std::to_string(a.heads) + " hd=" + std::to_string(a.hd) + " segments=" + std::to_string(a.segs.size()) +
             (products == AttnProducts::F32 ? " products f32" : "");
    const int64_t w = a.heads * a.hd;
    c.in = {make(g, rows, 3 * w, DType::F32, 0, -2, 2), make(g, rows, w, DType::F32, 3)};
    c.out = 1;
    const float scale = float(1.0 / std::sqrt(double(a.hd)));
    c.op = [=](Backend& b, std::vector<Tensor>& t) {
      b.attention(t[1], t[0].cols_view(0, w), t[0].cols_view(w, w), t[0].cols_view(2 * w, w), a.heads, a.hd, scale, a.segs, products);
    };
    c.acts = {0, 1};
    check(c);
  }
  // The cross form (Gemma's query chunks): nq query rows against all 45 keys of one segment, out
  // separate and out aliasing q.
  for (int64_t nq : {1, 7, 20}) {
    Case c;
    c.name = "attention cross nq=" + std::to_string(nq);
    const int64_t heads = 2, hd = 72, w = heads * hd, rows = 45;
    c.in = {make(g, rows, 3 * w, DType::F32, 0, -2, 2), make(g, rows, w, DType::F32, 3)};
    c.out = 1;
    c.op = [=](Backend& b, std::vector<Tensor>& t) {
      const Tensor k = t[0].cols_view(w, w), v = t[0].cols_view(2 * w, w);
      b.attention(t[1].rows_view(3, nq), t[0].cols_view(0, w).rows_view(3, nq), k, v, heads, hd, 0.3f, {{0, rows}});
      const Tensor q = t[0].cols_view(0, w).rows_view(25, nq);
      b.attention(q, q, k, v, heads, hd, 0.3f, {{0, rows}});
    };
    c.acts = {0, 1};
    check(c);
  }
}

TEST("metal: gather_sum vs cpu (1/4/9 taps, table dtypes, accumulate, negative indices)") {
  if (!enabled()) return;
  std::mt19937 g(16);
  for (int64_t taps : {1, 4, 9})
    for (DType td : {DType::F32, DType::F16, DType::BF16})
      for (int acc = 0; acc < 2; acc++) {
        const int64_t rows = 33, cols = 65, trows = 40;
        std::vector<int32_t> idx(size_t(rows * taps));
        std::vector<float> wt(size_t(rows * taps));
        for (size_t i = 0; i < idx.size(); i++) {
          idx[i] = int32_t(g() % (trows + 3)) - 3;  // some negative: no contribution
          wt[i] = float(int(g() % 1000) - 500) / 500.0f;
        }
        std::vector<char> lookup(idx.size() * 8);
        std::memcpy(lookup.data(), idx.data(), idx.size() * 4);
        std::memcpy(lookup.data() + idx.size() * 4, wt.data(), wt.size() * 4);
        Case c;
        c.name = "gather_sum taps=" + std::to_string(taps) + " table=" + dn(td) + (acc ? " accumulate" : "");
        c.in = {make(g, rows, cols), make(g, trows, cols, td, 2), raw(lookup.data(), lookup.size())};
        c.out = 0;
        c.op = [=](Backend& b, std::vector<Tensor>& t) { b.gather_sum(t[0], t[1], t[2].buf, taps, acc); };
        c.acts = {0};
        check(c);
      }
}

TEST("metal: count_nonfinite and bad arguments are coded errors") {
  if (!enabled()) return;
  auto b = mtl::make_metal_backend(on_gpu() ? "metal" : "metal-emulated");
  Buffer* buf = b->alloc(4 * 12);
  std::vector<float> v(12, 1.0f);
  v[7] = NAN;
  v[9] = INFINITY;
  b->upload(buf, 0, v.data(), 48);
  int64_t first = -1;
  EXPECT(b->count_nonfinite(make_tensor(buf, 0, DType::F32, 3, 4), &first) == 2);
  EXPECT(first == 7);
  Tensor x = make_tensor(buf, 0, DType::F32, 3, 4), w = make_tensor(buf, 0, DType::F32, 2, 3);
  bool threw = false;
  try {
    b->linear(x, x, w, LinearArgs{});
  } catch (const tessera::Error& e) {
    threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("linear") != std::string::npos;
  }
  EXPECT(threw);
  threw = false;
  try {  // a GEGLU multiplier of the wrong shape
    LinearArgs a;
    a.mul = &w;
    b->linear(make_tensor(buf, 0, DType::F32, 3, 2), x.cols_view(0, 3), w, a);
  } catch (const tessera::Error& e) {
    threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("mul") != std::string::npos;
  }
  EXPECT(threw);
  threw = false;
  try {
    b->attention(x, x, x, x, 1, 4, 1.0f, {{0, 5}});
  } catch (const tessera::Error& e) {
    threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("segment") != std::string::npos;
  }
  EXPECT(threw);
  // half and bfloat never meet in one op: a linear from f16 into bf16, a norm from bf16 into f16 (or into f32)
  const Tensor xh = make_tensor(buf, 0, DType::F16, 3, 4), yb = make_tensor(buf, 0, DType::BF16, 3, 2), xb = make_tensor(buf, 0, DType::BF16, 3, 4);
  const Tensor g = make_tensor(buf, 0, DType::F32, 1, 4);
  const std::function<void()> mixed[] = {[&] { b->linear(yb, xh, make_tensor(buf, 0, DType::F32, 2, 4), LinearArgs{}); },
                                         [&] { b->layer_norm(xh, xb, g, g, 1e-6f); },
                                         [&] { b->rms_norm(x, xb, &g, 4, 1e-6f, nullptr); }};
  for (const auto& f : mixed) {
    threw = false;
    try {
      f();
    } catch (const tessera::Error& e) {
      threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("bf16") != std::string::npos;
    }
    EXPECT(threw);
  }
  b->release(buf);
}

// The finite check on the device (metal/finite.metal): counted by the exponent's bits, so it holds under fast
// math too (TESSERA_METAL_OPS=fast), reported at the next wait with the stage, the count and the first bad
// value; a strided view counts only its own columns; the largest finite floats are not counted.
TEST("metal: check_finite counts on the device and reports at the next wait (ERR_NUMERIC naming the stage)") {
  if (!enabled()) return;
  auto b = mtl::make_metal_backend(on_gpu() ? "metal" : "metal-emulated");
  const int64_t rows = 5, cols = 70, ld = 75;  // a view of 70 columns in rows of 75, ragged against the 64-wide groups
  std::vector<float> v(size_t(rows * ld), 0.5f);
  v[1] = FLT_MAX;
  v[2] = -FLT_MAX;
  for (int64_t r = 0; r < rows; r++) v[size_t(r * ld + 72)] = NAN;  // outside the view: not counted
  Buffer* buf = b->alloc(v.size() * 4);
  b->upload(buf, 0, v.data(), v.size() * 4);
  const Tensor x = make_tensor(buf, 0, DType::F32, rows, ld).cols_view(0, cols);
  b->check_finite(x, "clean");
  b->finish();  // nothing to report
  v[size_t(2 * ld + 69)] = -INFINITY;
  v[size_t(1 * ld + 66)] = NAN;
  uint32_t payload = 0x7fc01234u;  // a NaN with a payload
  std::memcpy(&v[size_t(4 * ld + 3)], &payload, 4);
  b->upload(buf, 0, v.data(), v.size() * 4);
  b->check_finite(x, "clean again");
  b->check_finite(x, "block.3");  // the first check that counted anything is the one reported
  std::string msg;
  try {
    b->finish();
  } catch (const tessera::Error& e) {
    if (e.code() == tessera::Code::Numeric) msg = e.what();
  }
  // "clean again" ran on the same data: it is reported first
  EXPECT_MSG(msg == "stage 'clean again' produced 3 non-finite value(s); the first at token 1, channel 66", msg);
  b->finish();  // reported once: the slots are free again
  b->release(buf);
}

TEST("metal: every kernel becomes a pipeline within the device's limits") {
  if (!enabled()) return;
  auto ex = on_gpu() ? mtl::make_metal_executor() : mtl::make_emu_executor(mtl::EmuOptions{});
  EXPECT(mtl::kernel_count() > 10);
  for (int i = 0; i < mtl::kernel_count(); i++) {
    const mtl::KernelInfo& k = mtl::kernel_at(i);
    const uint32_t mt = ex->max_threads(k);  // on the GPU: compiles the library and creates the pipeline
    std::printf("     %-20s %s:%d max threads %u\n", k.name, k.file, k.line, mt);
    // every op layer dispatch uses at most 256 threads per threadgroup (norms); matmul and attention need 128
    EXPECT_MSG(mt >= 256, k.name << ": the pipeline allows only " << mt << " threads per threadgroup");
  }
  EXPECT(ex->limits().max_tg_memory >= 32768);
}

// The counters (docs/metal-on-linux.md#counters) on the op layer's dispatches: one linear's device traffic is
// what its tiles read and write, and counting by grid classes gives the same numbers as running every group.
std::vector<mtl::DispatchCounts> counted(const Case& c, bool classes) {
  mtl::EmuOptions o = emu(0, 0, 0xFF);
  o.count = true;
  o.count_classes = classes;
  auto ex = mtl::make_emu_executor(o);
  mtl::Executor* raw_ex = ex.get();
  auto b = mtl::make_metal_backend(std::move(ex), "metal-emulated");
  run_on(*b, c);
  return mtl::take_emu_counts(*raw_ex);
}

TEST("metal: the emulator counts each dispatch's traffic and work; counting by grid classes equals running every group") {
  if (!enabled() || on_gpu()) return;
  std::mt19937 g(18);
  Case c;
  c.name = "linear 70x96->72 counted";
  c.in = {make(g, 70, 96), make(g, 72, 96), make(g, 70, 72)};
  c.out = 2;
  c.op = [](Backend& b, std::vector<Tensor>& t) { b.linear(t[2], t[0], t[1], LinearArgs{}); };
  const auto all = counted(c, false), cls = counted(c, true);
  EXPECT(all.size() == 1 && cls.size() == 1);
  const mtl::DispatchCounts& a = all[0];
  std::printf("     linear: dev read %llu write %llu, tg read %llu write %llu, mma %llu, fma %llu, alu %llu, barriers %llu\n",
              (unsigned long long)a.dev_read, (unsigned long long)a.dev_write, (unsigned long long)a.tg_read, (unsigned long long)a.tg_write,
              (unsigned long long)a.mma, (unsigned long long)a.fma, (unsigned long long)a.alu, (unsigned long long)a.tg_barriers);
  EXPECT(a.dev_write == 70 * 72 * 4);
  EXPECT(a.mma > 0 && a.tg_read > 0 && a.tg_write > 0 && a.alu > 0 && a.tg_barriers > 0);
  const mtl::DispatchCounts& k = cls[0];
  EXPECT_MSG(k.dev_read == a.dev_read && k.dev_write == a.dev_write && k.tg_read == a.tg_read && k.tg_write == a.tg_write && k.mma == a.mma &&
                 k.fma == a.fma && k.alu == a.alu && k.special == a.special && k.tg_barriers == a.tg_barriers && k.simd_barriers == a.simd_barriers,
             "class counts differ: dev read " << k.dev_read << " vs " << a.dev_read << ", alu " << k.alu << " vs " << a.alu);
}

// docs/metal.md#counted-traffic: the design bars, on the Qwen3.5 tower's shapes at 4,096 patches (counted by
// grid classes: these are counts, not timings). Named "metal counts:" so that the sanitizer run of the op
// cases ("metal:") leaves it out: it checks the counting build's numbers, not memory safety, and its
// 4,096-row dispatches are slow under ASan.
TEST("metal counts: traffic: GEMM within 2x of the 64x64-tile ideal, attention within 2x of one K/V pass per 32-row query block") {
  if (!enabled() || on_gpu()) return;
  std::mt19937 g(19);
  {
    const int64_t m = 4096, k = 1152, n = 4304;
    Case c;
    c.name = "linear 4096x1152->4304 bf16";
    c.in = {make(g, m, k), make(g, n, k, DType::BF16), make(g, m, n)};
    c.out = 2;
    c.op = [](Backend& b, std::vector<Tensor>& t) { b.linear(t[2], t[0], t[1], LinearArgs{}); };
    const auto r = counted(c, true);
    EXPECT(r.size() == 1);
    const double tiles_n = double((n + 63) / 64), tiles_m = double((m + 63) / 64);
    const double ideal = double(m) * k * 4 * tiles_n + double(n) * k * 2 * tiles_m + double(m) * n * 4;
    const double got = double(r[0].dev_read + r[0].dev_write);
    std::printf("     %s: device %.1f MB, 64x64-tile ideal %.1f MB (%.2fx); threadgroup %.1f MB; %llu simdgroup MACs\n", c.name.c_str(), got / 1e6,
                ideal / 1e6, got / ideal, double(r[0].tg_read + r[0].tg_write) / 1e6, (unsigned long long)r[0].mma);
    EXPECT_MSG(got <= 2 * ideal, c.name << ": device traffic " << got << " B, over 2x the ideal " << ideal);
    EXPECT(r[0].mma == uint64_t(tiles_m * 8) * uint64_t(tiles_n * 8) * uint64_t(k / 8));
  }
  {
    const int64_t rows = 4096, heads = 16, hd = 72, w = heads * hd;
    Case c;
    c.name = "attention 4096 rows, 16 heads of 72";
    c.in = {make(g, rows, 3 * w, DType::F32, 0, -2, 2), make(g, rows, w)};
    c.out = 1;
    c.op = [=](Backend& b, std::vector<Tensor>& t) {
      b.attention(t[1], t[0].cols_view(0, w), t[0].cols_view(w, w), t[0].cols_view(2 * w, w), heads, hd, 0.1f, {{0, rows}});
    };
    const auto r = counted(c, true);
    EXPECT(r.size() == 1);
    const double blocks = double((rows + 31) / 32);
    const double one_pass = blocks * 2 * double(rows) * hd * 4;  // per head: K and V once per 32-row block
    const double q_and_out = 2 * double(rows) * hd * 4;
    const double per_head = double(r[0].dev_read + r[0].dev_write) / heads;
    std::printf("     %s: device per head %.1f MB, one K/V pass per 32-row block %.1f MB (+ q and out %.1f MB): %.2fx; threadgroup per head %.1f MB\n",
                c.name.c_str(), per_head / 1e6, one_pass / 1e6, q_and_out / 1e6, per_head / (one_pass + q_and_out),
                double(r[0].tg_read + r[0].tg_write) / heads / 1e6);
    EXPECT_MSG(per_head <= 2 * (one_pass + q_and_out), c.name << ": device traffic per head " << per_head << " B, over 2x " << one_pass + q_and_out);
  }
}

TEST("metal: a pipeline allowing fewer threads: norms and rope's norm adapt, matmul refuses with ERR_GPU") {
  if (!enabled() || on_gpu()) return;
  std::mt19937 g(17);
  Case c;
  c.name = "layer_norm + rms_norm + rope with a head norm, pipelines of 64 threads";
  c.in = {make(g, 3, 300, DType::F32, 0, -2, 3), make(g, 1, 300), make(g, 1, 300), make(g, 3, 300), make(g, 3, 60), make(g, 3, 60), make(g, 1, 60)};
  c.out = 3;
  c.op = [](Backend& b, std::vector<Tensor>& t) {
    b.layer_norm(t[3], t[0], t[1], t[2], 1e-6f);
    b.rms_norm(t[3], t[3], &t[1], 300, 1e-6f, nullptr);
    b.rms_norm(t[3], t[3], nullptr, 30, 1e-6f, nullptr);
    const HeadNorm norm{&t[6], 1e-6f};
    b.rope(t[3], t[4], t[5], 5, 60, 2, &norm);  // 5 heads for 2 simdgroups
  };
  auto cpu = tessera::cpu::make_cpu_backend(1);
  const std::vector<float> ref = run_on(*cpu, c);
  mtl::EmuOptions o = emu(0, 0, 0xFF, 64);
  auto small = mtl::make_metal_backend(mtl::make_emu_executor(o), "metal-emulated");
  const std::vector<float> got = run_on(*small, c);
  double err = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); i++) err = std::max(err, std::fabs(double(got[i]) - ref[i])), mx = std::max(mx, std::fabs(double(ref[i])));
  EXPECT_MSG(err <= 2e-5 * mx, "max err " << err);
  Case l;
  l.name = "linear with pipelines of 64 threads";
  l.in = {make(g, 8, 16), make(g, 8, 16), make(g, 8, 8)};
  l.out = 2;
  l.op = [](Backend& b, std::vector<Tensor>& t) { b.linear(t[2], t[0], t[1], LinearArgs{}); };
  bool refused = false;
  try {
    run_on(*small, l);
  } catch (const tessera::Error& e) {
    refused = e.code() == tessera::Code::Gpu && std::string(e.what()).find("needs 128") != std::string::npos;
  }
  EXPECT(refused);
}

TEST("metal scratch: a Gemma 4 encode in precision f16 and bf16 allocates what scratch_bytes predicts (half / bfloat activations, f32 q, k and v)") {
  if (!enabled() || on_gpu()) return;
  for (int64_t chunk : {int64_t(1) << 20, int64_t(30)}) {
    auto backend = [](mtl::Precision p) { return mtl::make_metal_backend(mtl::make_emu_executor(emu(0, 0, 0xFF)), "metal-emulated", p); };
    const tessera::modeltest::ScratchUse f32 = tessera::modeltest::gemma_scratch(backend(mtl::Precision::F32), chunk);
    const tessera::modeltest::ScratchUse f16 = tessera::modeltest::gemma_scratch(backend(mtl::Precision::F16), chunk);
    const tessera::modeltest::ScratchUse bf16 = tessera::modeltest::gemma_scratch(backend(mtl::Precision::Bf16), chunk);
    for (const auto* u : {&f32, &f16, &bf16})
      EXPECT_MSG(u->predicted == u->allocated, "chunk " << chunk << (u == &f16 ? " f16" : u == &bf16 ? " bf16" : " f32") << ": predicted "
                                                        << u->predicted << ", allocated " << u->allocated);
    EXPECT_MSG(f16.predicted < f32.predicted, "chunk " << chunk << ": f16 scratch " << f16.predicted << " is not below f32's " << f32.predicted);
    EXPECT_MSG(bf16.predicted == f16.predicted, "chunk " << chunk << ": bf16 scratch " << bf16.predicted << " is not f16's " << f16.predicted);
  }
}

TEST("metal scratch: a Qwen encode in precision f16 and bf16 allocates what scratch_bytes predicts (the residual stream f32)") {
  if (!enabled() || on_gpu()) return;
  for (int64_t chunk : {int64_t(1) << 20, int64_t(36)}) {
    auto backend = [](mtl::Precision p) { return mtl::make_metal_backend(mtl::make_emu_executor(emu(0, 0, 0xFF)), "metal-emulated", p); };
    const tessera::modeltest::ScratchUse f32 = tessera::modeltest::qwen_scratch(backend(mtl::Precision::F32), chunk);
    const tessera::modeltest::ScratchUse f16 = tessera::modeltest::qwen_scratch(backend(mtl::Precision::F16), chunk);
    const tessera::modeltest::ScratchUse bf16 = tessera::modeltest::qwen_scratch(backend(mtl::Precision::Bf16), chunk);
    for (const auto* u : {&f32, &f16, &bf16})
      EXPECT_MSG(u->predicted == u->allocated, "chunk " << chunk << (u == &f16 ? " f16" : u == &bf16 ? " bf16" : " f32") << ": predicted "
                                                        << u->predicted << ", allocated " << u->allocated);
    // the residual stream f32 in both: f16's and bf16's scratch alike, below f32's
    EXPECT_MSG(f16.predicted == bf16.predicted && bf16.predicted < f32.predicted,
               "chunk " << chunk << ": scratch f16 " << f16.predicted << ", bf16 " << bf16.predicted << ", f32 " << f32.predicted);
  }
}
