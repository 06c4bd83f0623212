// One threadgroup on one worker: a fiber per GPU thread, run until each parks at a barrier or a
// SIMD-group collective; collectives complete per simdgroup, barriers per group; anything that can no
// longer move is reported (deadlock, barrier divergence, divergent simdgroup_matrix op).
#include <algorithm>
#include <cstring>
#include <sstream>

#include "counts.h"
#include "runtime.h"
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define MSLEMU_ASAN 1
#endif
#endif
#ifndef MSLEMU_ASAN
#define ASAN_POISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#endif

namespace mslemu {

thread_local Group* G = nullptr;
thread_local Lane* L = nullptr;
std::atomic<uint64_t> g_switches{0}, g_collectives{0}, g_barriers{0}, g_progress{0};

const char* coll_name(Coll c) {
  static const char* n[] = {"simd_sum", "simd_max", "simd_min", "simd_product", "simd_and", "simd_or", "simd_xor",
                            "simd_shuffle", "simd_shuffle_xor", "simd_shuffle_down", "simd_shuffle_up", "simd_broadcast",
                            "simd_broadcast_first", "simd_ballot", "simd_all", "simd_any", "simd_prefix_exclusive_sum",
                            "simd_prefix_inclusive_sum", "simd_prefix_exclusive_product", "simd_prefix_inclusive_product",
                            "simdgroup_barrier", "simdgroup_load", "simdgroup_store", "simdgroup_multiply_accumulate",
                            "simdgroup_multiply"};
  static_assert(sizeof(n) / sizeof(n[0]) == size_t(Coll::kCount), "coll_name table");
  return n[int(c)];
}

std::string where(const Site& s) {
  std::ostringstream o;
  o << (s.file ? s.file : "?") << ":" << s.line;
  return o.str();
}

static bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && (a.file == b.file || (a.file && b.file && std::strcmp(a.file, b.file) == 0));
}

static void lane_entry() {
  Lane* me = L;
  G->fn(me->inv);
  me->st = DONE;
  fiber_switch(&me->ctx, &G->sched);  // never resumed
  __builtin_trap();
}

[[noreturn]] void kernel_fail(const char* msg) {
  if (!L) throw Abort{msg};
  G->error = msg;
  L->st = FAILED;
  fiber_switch(&L->ctx, &G->sched);
  __builtin_trap();  // a failed lane is never resumed
}

static void park() {
  g_switches.fetch_add(1, std::memory_order_relaxed);
  g_progress.fetch_add(1, std::memory_order_relaxed);
  fiber_switch(&L->ctx, &G->sched);
}

void collective(Coll op, Site s, void* in, void* out, long arg, CollFn fn) {
  L->st = AT_COLL;
  L->op = op;
  L->site = s;
  L->in = in;
  L->out = out;
  L->arg = arg;
  L->fn = fn;
  park();
}

void tg_barrier(Site s) {
  L->st = AT_BARRIER;
  L->site = s;
  park();
}

void* tg_alloc(int site_id, size_t bytes, size_t align) {
  auto it = G->tg_sites.find(site_id);
  if (it != G->tg_sites.end()) return G->arena + it->second;
  size_t off = (G->arena_used + align - 1) / align * align;
  if (off + bytes > kTgMemory) {
    std::string m = "threadgroup memory exceeds 32 KiB (" + std::to_string(off + bytes) + " bytes needed)";
    if (L) kernel_fail(m.c_str());
    throw Abort{m};
  }
  G->tg_sites[site_id] = off;
  G->arena_used = off + bytes;
  ASAN_UNPOISON_MEMORY_REGION(G->arena + off, bytes);
  return G->arena + off;
}

// Queues lanes released by a barrier or collective. Forward: in index order after the waiting lanes.
// Reverse: reverse order, before the waiting lanes. Shuffled: a fresh permutation, each at a random
// place among the waiting ones. Appending in every schedule would hide races across a collective (a
// simdgroup that got through simd_sum could never overtake the others).
static void enqueue(std::vector<int>& ids) {
  const Schedule s = G->opt->sched;
  if (s == Schedule::Shuffled) std::shuffle(ids.begin(), ids.end(), G->rng);
  else if (s == Schedule::Reverse) std::sort(ids.rbegin(), ids.rend());
  else std::sort(ids.begin(), ids.end());
  if (s == Schedule::Forward) {
    G->queue.insert(G->queue.end(), ids.begin(), ids.end());
    return;
  }
  size_t k = G->qhead;
  for (int i : ids) {
    size_t pos = s == Schedule::Reverse ? k++ : G->qhead + G->rng() % (G->queue.size() - G->qhead + 1);
    G->queue.insert(G->queue.begin() + long(pos), i);
  }
}

// Completes one collective of simdgroup sg if every unfinished lane is parked; true if lanes moved.
static bool try_simd(int sg) {
  const int n = int(G->lanes.size());
  const int lo = sg * 32, hi = std::min(n, lo + 32);
  int first = -1;
  for (int i = lo; i < hi; i++) {
    if (G->lanes[i].st == RUNNABLE) return false;  // still running toward a sync point
    if (first < 0 && G->lanes[i].st == AT_COLL) first = i;
  }
  if (first < 0) return false;
  const Lane& f = G->lanes[first];
  CollCtx c{};
  c.op = f.op;
  c.fn = f.fn;
  c.poison = G->opt->poison;
  c.launched = (hi - lo == 32) ? 0xffffffffu : ((1u << (hi - lo)) - 1);
  uint32_t live = 0;
  std::vector<int> rel;
  for (int i = lo; i < hi; i++) {
    Lane& l = G->lanes[i];
    if (l.st != DONE) live |= 1u << (i - lo);
    if (l.st == AT_COLL && same_site(l.site, f.site)) {
      if (l.op != f.op)
        throw Abort{"lanes of simdgroup " + std::to_string(sg) + " reached different collectives at " + where(f.site)};
      c.active |= 1u << (i - lo);
      c.in[i - lo] = l.in;
      c.out[i - lo] = l.out;
      c.arg[i - lo] = l.arg;
      rel.push_back(i);
    }
  }
  const bool matrix = f.op == Coll::MatLoad || f.op == Coll::MatStore || f.op == Coll::MatMad || f.op == Coll::MatMul;
  if (matrix && c.active != c.launched) {
    std::ostringstream o;
    o << coll_name(f.op) << " at " << where(f.site) << " reached by lanes 0x" << std::hex << c.active
      << " of simdgroup " << std::dec << sg << " whose launched lanes are 0x" << std::hex << c.launched << " (live 0x" << live
      << std::dec << "): simdgroup_matrix ops need uniform control flow";
    throw Abort{o.str()};
  }
  c.nlanes = __builtin_popcount(c.active);
  g_collectives.fetch_add(1, std::memory_order_relaxed);
  if (t_counts && f.op == Coll::SimdBarrier) t_counts->simd_barriers++;
  Lane* saved = L;
  L = nullptr;  // kernel_fail from fn runs on the scheduler's stack: throw directly
  c.fn(c);
  L = saved;
  for (int i : rel) G->lanes[i].st = RUNNABLE;
  enqueue(rel);
  return true;
}

static std::string stuck_report(const char* why) {
  std::map<std::string, int> at;
  int done = 0;
  for (auto& l : G->lanes) {
    if (l.st == DONE) {
      done++;
      continue;
    }
    at[std::string(l.st == AT_BARRIER ? "threadgroup_barrier" : coll_name(l.op)) + " at " + where(l.site)]++;
  }
  std::ostringstream o;
  o << why << ":";
  for (auto& kv : at) o << "\n    " << kv.second << " thread(s) waiting in " << kv.first;
  if (done) o << "\n    " << done << " thread(s) already returned";
  return o.str();
}

void run_group(U3 gpos, std::vector<void*>& bufs, std::vector<size_t>& sizes) {
  const Dispatch& d = *G->d;
  const int n = int(G->lanes.size());
  G->pos = gpos;
  ASAN_UNPOISON_MEMORY_REGION(G->arena, kTgMemory);
  std::memset(G->arena, G->opt->poison, kTgMemory);
  ASAN_POISON_MEMORY_REGION(G->arena, kTgMemory);
  G->arena_used = 0;
  G->tg_sites.clear();
  G->tgptrs.assign(31, nullptr);
  for (auto& t : d.tgmem) G->tgptrs[size_t(t.index)] = tg_alloc(-1 - t.index, t.bytes, 16);
  G->queue.clear();
  G->qhead = 0;
  const uint32_t nsg = uint32_t((n + 31) / 32);
  for (int i = 0; i < n; i++) {
    Lane& l = G->lanes[size_t(i)];
    l.st = RUNNABLE;
    l.site = Site{nullptr, 0};
    const uint32_t ui = uint32_t(i);
    U3 tp{ui % d.threads.x, (ui / d.threads.x) % d.threads.y, ui / (d.threads.x * d.threads.y)};
    l.inv = Invocation{bufs.data(), sizes.data(), int(bufs.size()), G->tgptrs.data(), int(G->tgptrs.size()),
                       U3{gpos.x * d.threads.x + tp.x, gpos.y * d.threads.y + tp.y, gpos.z * d.threads.z + tp.z}, tp, gpos,
                       d.threads, d.groups, U3{d.groups.x * d.threads.x, d.groups.y * d.threads.y, d.groups.z * d.threads.z},
                       ui, ui % 32, ui / 32, nsg, 32};
    fiber_make(&l.ctx, G->stacks.stack(size_t(i)), lane_entry);
  }
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) all[size_t(i)] = i;
  enqueue(all);
  for (;;) {
    while (G->qhead < G->queue.size()) {
      const int i = G->queue[G->qhead++];
      Lane& l = G->lanes[size_t(i)];
      if (l.st != RUNNABLE) continue;
      L = &l;
      g_switches.fetch_add(1, std::memory_order_relaxed);
      fiber_switch(&G->sched, &l.ctx);
      L = nullptr;
      if (l.st == FAILED) throw Abort{G->error + " (thread " + std::to_string(i) + ")"};
      if (l.st == AT_COLL) try_simd(i / 32);
    }
    G->queue.clear();
    G->qhead = 0;
    bool progress = false;
    for (int s = 0; s < int(nsg) && !progress; s++) progress = try_simd(s);
    if (progress) continue;
    int done = 0, bar = 0;
    const Site* s0 = nullptr;
    bool same = true;
    for (auto& l : G->lanes) {
      if (l.st == DONE) done++;
      else if (l.st == AT_BARRIER) {
        bar++;
        if (!s0) s0 = &l.site;
        else if (!same_site(l.site, *s0)) same = false;
      }
    }
    if (done == n) return;
    if (bar + done == n) {
      if (done) throw Abort{stuck_report("barrier divergence: some threads returned while others wait at a threadgroup_barrier")};
      if (!same) throw Abort{stuck_report("barrier divergence: threads wait at different threadgroup_barrier calls")};
      g_barriers.fetch_add(1, std::memory_order_relaxed);
      if (t_counts) t_counts->tg_barriers++;
      for (int i = 0; i < n; i++) G->lanes[size_t(i)].st = RUNNABLE;
      enqueue(all);
      continue;
    }
    throw Abort{stuck_report("deadlock: no thread can make progress")};
  }
}

}  // namespace mslemu
