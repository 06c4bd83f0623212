// Dispatch level: kernel registry, bindings, group order, worker threads, the watchdog (a lane that
// never reaches a sync point) and the integer-division trap report.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "counts.h"
#include "runtime.h"

namespace mslemu {
namespace {

std::vector<KernelEntry>& registry() {
  static std::vector<KernelEntry> r;
  return r;
}

// What each worker is doing, for the watchdog and the SIGFPE report (read racily, right before abort).
struct Activity {
  std::atomic<const char*> kernel{nullptr};
  std::atomic<Group*> group{nullptr};
};
constexpr int kMaxWorkers = 16;
Activity g_activity[kMaxWorkers];
thread_local int t_worker = 0;

std::string lane_where(Group* g) {
  std::ostringstream o;
  const Activity& a = g_activity[t_worker];
  o << "kernel " << (a.kernel.load() ? a.kernel.load() : "?") << ", group (" << g->pos.x << "," << g->pos.y << "," << g->pos.z << ")";
  if (L) {
    o << ", thread " << L->inv.tiitg;
    if (L->site.file) o << ", last sync point " << where(L->site);
    else o << ", before its first sync point";
  }
  return o.str();
}

void on_sigfpe(int sig) {
  if (!G) {  // not an emulated kernel on this thread: what the process would have done without us
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  // async-signal-safe enough for a report right before abort()
  std::string m = "mslemu: integer division by zero (SIGFPE; MSL leaves the result unspecified, x86 traps) in ";
  m += G ? lane_where(G) : std::string("the emulator");
  m += "\n";
  ssize_t w = write(2, m.data(), m.size());
  (void)w;
  std::abort();
}

// The watchdog: cooperative fibers can never make a spin-wait succeed, so a lane that runs for
// MSLEMU_WATCHDOG_S seconds (default 20) without parking is reported, then the process aborts.
std::mutex g_wd_mu;
std::atomic<int> g_running{0};
void watchdog_loop() {
  const char* e = std::getenv("MSLEMU_WATCHDOG_S");
  const int limit = e ? std::max(1, std::atoi(e)) : 20;
  uint64_t last = g_progress.load();
  int still = 0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const uint64_t now = g_progress.load();
    if (g_running.load() == 0 || now != last) {
      last = now;
      still = 0;
      continue;
    }
    if (++still < limit) continue;
    std::ostringstream o;
    o << "mslemu: watchdog: no thread reached a barrier or collective for " << limit << " s (a spin-wait or an endless loop)";
    for (int w = 0; w < kMaxWorkers; w++) {
      Group* g = g_activity[w].group.load();
      if (!g) continue;
      o << "\n    worker " << w << ": kernel " << g_activity[w].kernel.load() << ", group (" << g->pos.x << "," << g->pos.y << "," << g->pos.z << ")";
      int shown = 0;
      for (size_t i = 0; i < g->lanes.size() && shown < 4; i++)
        if (g->lanes[i].st == RUNNABLE) {
          o << "\n      thread " << i << " runnable, last sync point " << (g->lanes[i].site.file ? where(g->lanes[i].site) : "none");
          shown++;
        }
    }
    std::fprintf(stderr, "%s\n", o.str().c_str());
    std::abort();
  }
}
void start_watchdog() {
  static std::once_flag once;
  std::call_once(once, [] { std::thread(watchdog_loop).detach(); });
}

Group* worker_group() {
  static thread_local std::unique_ptr<Group> g;
  if (!g) g = std::make_unique<Group>();
  return g.get();
}

// Runs `groups` (a subset of the grid) on this thread; "" or the report.
// With `counts`, what they did is added to it (times `weight`).
std::string run_groups(const Dispatch& d, const RunOptions& o, const KernelEntry& k, const std::vector<U3>& groups, int worker,
                       Counts* counts = nullptr, uint64_t weight = 1) {
  t_worker = worker;
  Group* g = worker_group();
  G = g;
  g->d = &d;
  g->opt = &o;
  g->fn = k.fn;
  g->rng.seed(o.seed * 0x9E3779B97F4A7C15ull + uint64_t(worker));
  g->lanes.resize(size_t(d.threads.x) * d.threads.y * d.threads.z);
  int maxb = 0;
  for (auto& b : d.buffers) maxb = std::max(maxb, b.index + 1);
  std::vector<void*> bufs(size_t(maxb), nullptr);
  std::vector<size_t> sizes(size_t(maxb), 0);
  for (auto& b : d.buffers) {
    bufs[size_t(b.index)] = b.ptr;
    sizes[size_t(b.index)] = b.size;
  }
  g_activity[worker].kernel = k.name;
  g_activity[worker].group = g;
  Counts mine;
  if (counts) {
    // device memory: the buffers bound to pointer parameters (a `constant T&` argument lives in registers)
    CountRanges r{};
    r.tg_lo = reinterpret_cast<const char*>(g->arena);
    r.tg_hi = r.tg_lo + kTgMemory;
    for (auto& b : d.buffers) {
      bool arg = false;
      for (int i = 0; i < k.nparams; i++)
        if (k.params[i].kind == 0 && k.params[i].index == b.index && k.params[i].bytes) arg = true;
      if (arg || r.n == 32) continue;
      r.lo[r.n] = static_cast<const char*>(b.ptr);
      r.hi[r.n] = r.lo[r.n] + b.size;
      r.n++;
    }
    t_ranges = r;
    take_counts();  // start from zero
    t_counts = &mine;
  }
  std::string err;
  try {
    for (auto& gp : groups) run_group(gp, bufs, sizes);
  } catch (Abort& a) {
    std::ostringstream os;
    os << "mslemu: kernel " << k.name << " (" << k.file << ":" << k.line << "), group (" << g->pos.x << "," << g->pos.y << ","
       << g->pos.z << "): " << a.msg;
    err = os.str();
  }
  g_activity[worker].group = nullptr;
  G = nullptr;
  if (counts) {
    add_counts(*counts, take_counts(), weight);
    t_counts = nullptr;
  }
  return err;
}

}  // namespace

Registrar::Registrar(std::initializer_list<KernelEntry> ks) {
  for (auto& k : ks) {
    for (auto& e : registry())
      if (std::strcmp(e.name, k.name) == 0) {
        std::fprintf(stderr, "mslemu: kernel %s defined twice (%s:%d and %s:%d)\n", k.name, e.file, e.line, k.file, k.line);
        std::abort();
      }
    registry().push_back(k);
  }
}

const KernelEntry* find_kernel(const char* name) {
  for (auto& e : registry())
    if (std::strcmp(e.name, name) == 0) return &e;
  return nullptr;
}
int kernel_count() { return int(registry().size()); }
const KernelEntry* kernel_at(int i) { return i >= 0 && i < kernel_count() ? &registry()[size_t(i)] : nullptr; }

void* Invocation::buffer(int i, size_t need, size_t align) const {
  if (i >= nbufs || !bufs[i]) {
    std::string m = "the kernel reads [[buffer(" + std::to_string(i) + ")]] but nothing is bound there";
    kernel_fail(m.c_str());
  }
  if (need > buf_sizes[i]) {
    std::string m = "[[buffer(" + std::to_string(i) + ")]] is " + std::to_string(buf_sizes[i]) + " bytes, the kernel's parameter needs " +
                    std::to_string(need);
    kernel_fail(m.c_str());
  }
  if (align > 1 && reinterpret_cast<uintptr_t>(bufs[i]) % align) {
    std::string m = "[[buffer(" + std::to_string(i) + ")]] is bound at an address not aligned to its element type (" +
                    std::to_string(align) + " bytes)";
    kernel_fail(m.c_str());
  }
  return bufs[i];
}

void* Invocation::tgmem(int i) const {
  if (i >= ntgmem || !tgmem_ptrs[i]) {
    std::string m = "[[threadgroup(" + std::to_string(i) + ")]] has no length set";
    kernel_fail(m.c_str());
  }
  return tgmem_ptrs[i];
}

Stats stats() { return Stats{g_switches.load(), g_collectives.load(), g_barriers.load()}; }

// Counting by classes (RunOptions::count_classes): per dimension of n groups, group 0 stands for the first
// n - 1 and group n - 1 for itself.
static std::vector<std::pair<U3, uint64_t>> class_representatives(U3 n) {
  auto dim = [](uint32_t m) {
    std::vector<std::pair<uint32_t, uint64_t>> v{{0u, m > 1 ? uint64_t(m - 1) : 1u}};
    if (m > 1) v.push_back({m - 1, 1});
    return v;
  };
  std::vector<std::pair<U3, uint64_t>> out;
  for (auto [z, wz] : dim(n.z))
    for (auto [y, wy] : dim(n.y))
      for (auto [x, wx] : dim(n.x)) out.push_back({U3{x, y, z}, wx * wy * wz});
  return out;
}

std::string run(const Dispatch& d, const RunOptions& o, Counts* counts) {
  const KernelEntry* k = find_kernel(d.kernel.c_str());
  if (!k) return "mslemu: unknown kernel " + d.kernel;
  const uint64_t n = uint64_t(d.threads.x) * d.threads.y * d.threads.z;
  if (n < 1 || n > 1024) return "mslemu: kernel " + d.kernel + ": threads per threadgroup must be 1..1024, got " + std::to_string(n);
  if (n > k->max_threads)
    return "mslemu: kernel " + d.kernel + ": " + std::to_string(n) + " threads per threadgroup exceed its [[max_total_threads_per_threadgroup(" +
           std::to_string(k->max_threads) + ")]]";
  if (uint64_t(d.groups.x) * d.groups.y * d.groups.z == 0) return "";
  size_t tg_total = 0;
  for (auto& t : d.tgmem) {
    if (t.index < 0 || t.index > 30) return "mslemu: kernel " + d.kernel + ": threadgroup memory index " + std::to_string(t.index) + " out of range";
    if (t.bytes % 16) return "mslemu: kernel " + d.kernel + ": threadgroup memory length at index " + std::to_string(t.index) + " must be a multiple of 16";
    tg_total += t.bytes;
  }
  if (tg_total > kTgMemory) return "mslemu: kernel " + d.kernel + ": threadgroup memory lengths exceed 32 KiB";
  for (auto& b : d.buffers)
    if (b.index < 0 || b.index > 30) return "mslemu: kernel " + d.kernel + ": buffer index " + std::to_string(b.index) + " out of range";
  start_watchdog();

  std::vector<U3> groups;
  for (uint32_t z = 0; z < d.groups.z; z++)
    for (uint32_t y = 0; y < d.groups.y; y++)
      for (uint32_t x = 0; x < d.groups.x; x++) groups.push_back({x, y, z});
  if (o.sched == Schedule::Reverse) std::reverse(groups.begin(), groups.end());
  if (o.sched == Schedule::Shuffled) {
    std::mt19937_64 rng(o.seed);
    std::shuffle(groups.begin(), groups.end(), rng);
  }
  static std::once_flag fpe_once;  // installed once for the process: concurrent runs never race on it
  std::call_once(fpe_once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_sigfpe;
    sigaction(SIGFPE, &sa, nullptr);
  });
  g_running++;
  std::string err;
  if (counts) *counts = Counts{};
  if (counts && o.count_classes) {
    for (auto& [gp, w] : class_representatives(d.groups)) {
      err = run_groups(d, o, *k, {gp}, 0, counts, w);
      if (!err.empty()) break;
    }
    g_running--;
    return err;
  }
  const int workers = o.sched == Schedule::Forward ? std::min<int>(std::max(1, std::min(o.workers, kMaxWorkers)), int(groups.size())) : 1;
  if (workers <= 1) {
    err = run_groups(d, o, *k, groups, 0, counts);
  } else {
    // Interleaved split, each worker in forward order on its own Group.
    std::vector<std::vector<U3>> part(static_cast<size_t>(workers));
    for (size_t i = 0; i < groups.size(); i++) part[i % size_t(workers)].push_back(groups[i]);
    std::vector<std::string> errs(static_cast<size_t>(workers));
    std::vector<std::thread> ts;
    std::vector<Counts> per(static_cast<size_t>(workers));
    Counts* pc = counts ? per.data() : nullptr;
    for (int w = 1; w < workers; w++) ts.emplace_back([&, w] { errs[size_t(w)] = run_groups(d, o, *k, part[size_t(w)], w, pc ? pc + w : nullptr); });
    errs[0] = run_groups(d, o, *k, part[0], 0, pc);
    for (auto& t : ts) t.join();
    if (counts)
      for (auto& c : per) add_counts(*counts, c, 1);
    for (auto& e : errs)
      if (!e.empty()) {
        err = e;
        break;
      }
  }
  g_running--;
  return err;
}

}  // namespace mslemu
