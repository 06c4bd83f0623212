// The stream and mapped weight stores: correct bytes for every stage, for K = 1..4 and across
// residencies; the ring never refills or hands out a slot still in use; read failures and files
// that shrink become ERR_WEIGHTS_CORRUPT; shutdown never hangs.
#include <atomic>
#include <cstring>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "common/error.h"
#include "harness.h"
#include "io/mapped_store.h"
#include "io/resident_store.h"
#include "io/stream_store.h"
#include "io_test_util.h"

using namespace tessera;
using namespace iotest;

namespace {

// A backend whose completions arrive on their own thread after a random delay, like Metal's.
class AsyncBackend final : public NoOpsBackend {
 public:
  FakeBackend inner;
  explicit AsyncBackend(unsigned seed) : rng_(seed), thread_([this] { loop(); }) {}
  ~AsyncBackend() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  const char* name() const override { return "async-fake"; }
  backend::Buffer* alloc(size_t b) override { return inner.alloc(b); }
  backend::Buffer* wrap_host(void* h, size_t b) override { return inner.wrap_host(h, b); }
  void release(backend::Buffer* b) override { inner.release(b); }
  void submit(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(fn));
    cv_.notify_all();
  }
  void finish() override {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return queue_.empty() && !running_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      int us = int(rng_() % 400);
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(us));  // the "GPU" still reads the slot
      fn();
      lk.lock();
      running_ = false;
      cv_.notify_all();
    }
  }
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false, running_ = false;
  std::thread thread_;
};

Code code_of(const std::function<void()>& fn, std::string* msg = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return Code::Internal;  // "no error" is never what these tests expect: Internal stands for it
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Fault injection for FileSet::set_pread.
std::atomic<long long> g_fail_at{-1};  // byte offset from which reads fail
std::atomic<int> g_errno{0};           // 0: report end of file (a short read); else fail with this errno
int64_t faulty_pread(platform::FileHandle fd, void* buf, size_t n, uint64_t off) {
  long long at = g_fail_at.load();
  if (at >= 0 && (long long)(off + n) > at) {
    if ((long long)off >= at) {
      if (g_errno.load()) {
        set_os_error(g_errno.load());
        return -1;
      }
      return 0;
    }
    n = size_t(at - (long long)off);
  }
  return platform::read_at(fd, buf, n, off);
}
int64_t dribbling_pread(platform::FileHandle fd, void* buf, size_t n, uint64_t off) {  // legal partial reads
  return platform::read_at(fd, buf, std::min<size_t>(n, 997), off);
}

}  // namespace

TEST("stream: every stage arrives intact, K = 1..4, over several passes") {
  uint64_t bytes = 0;
  sequential_tower("", 7, 40000, &bytes);
  TempFile f(pattern(0, bytes));
  TowerSpec spec = sequential_tower(f.path, 7, 40000, &bytes);
  uint64_t stage_run_bytes = 0;
  for (const auto& st : spec.stages)
    for (const auto& r : stage_layout(st).runs) stage_run_bytes += r.length;
  for (int k = 1; k <= 4; ++k) {
    FakeBackend be;
    {
      StreamStore store(spec, be, k);
      for (int pass = 0; pass < 3; ++pass) {
        store.begin_pass();
        for (size_t n = 0; n < spec.stages.size(); ++n) {
          const StageWeights& w = store.acquire(n);
          EXPECT_MSG(stage_matches_file(spec, n, w), "K=" << k << " stage " << n);
          be.submit([&store, n] { store.release(n); });
        }
        store.end_pass();
      }
      RingStats r = store.ring_stats();
      EXPECT(r.violations == 0 && r.stray_releases == 0);
      EXPECT(r.handed_out == 3 * spec.stages.size());
      EXPECT(r.max_in_use == 1);  // this backend completes at once
      // 7 stages > K: every pass reads every stage, one pread per stage (its tensors are contiguous)
      // Each stage is either read (one pread: its tensors are contiguous) or still in its slot
      // from the pass before (7 stages, K = 4: stage 3 returns to slot 3).
      EXPECT(r.stage_loads + r.kept == r.handed_out);
      EXPECT(r.preads == r.stage_loads);
      EXPECT_MSG(r.kept == (k == 4 ? 2u : 0u), "kept " << r.kept);
      if (k < 4) EXPECT(store.stats().bytes_read == 3 * stage_run_bytes);
      EXPECT(store.stats().resident_bytes == uint64_t(k) * stream_slot_bytes(spec));
      EXPECT(int(be.wrapped.size()) == k);  // slots are wrapped once, never per pass
      for (const auto& wr : be.wrapped) EXPECT(uintptr_t(wr.first) % stream_slot_alignment() == 0);
    }
    EXPECT(be.live_buffers == 0);
  }
}

TEST("stream: a tower that fits in the ring is read once across passes") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 3, 20000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 3, 20000, &bytes);
  FakeBackend be;
  StreamStore store(spec, be, 4);
  for (int pass = 0; pass < 2; ++pass) {
    store.begin_pass();
    for (size_t n = 0; n < 3; ++n) {
      EXPECT(stage_matches_file(spec, n, store.acquire(n)));
      store.release(n);
    }
    store.end_pass();
  }
  EXPECT_MSG(store.ring_stats().stage_loads == 3, store.ring_stats().stage_loads);
  EXPECT_MSG(store.ring_stats().kept == 3, store.ring_stats().kept);
}

TEST("stream: the ring never refills a slot the backend is still reading (async completions)") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 9, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 9, 30000, &bytes);
  for (int k = 1; k <= 4; ++k) {
    std::atomic<int> corrupted{0};
    AsyncBackend be{unsigned(k)};
    {
      StreamStore store(spec, be, k);
      for (int pass = 0; pass < 4; ++pass) {
        store.begin_pass();
        for (size_t n = 0; n < spec.stages.size(); ++n) {
          const StageWeights* w = &store.acquire(n);
          if (!stage_matches_file(spec, n, *w)) ++corrupted;
          // The "GPU" checks the bytes again when it finishes, just before the slot is released.
          be.submit([&, w, n] {
            if (!stage_matches_file(spec, n, *w)) ++corrupted;
            store.release(n);
          });
        }
        be.finish();  // as the models do: the pass's work completes before end_pass()
        store.end_pass();
      }
      RingStats r = store.ring_stats();
      EXPECT_MSG(r.violations == 0, "K=" << k);
      EXPECT(r.stray_releases == 0 && r.abandoned == 0);
      EXPECT_MSG(r.max_in_use <= uint64_t(k), "K=" << k << " max in use " << r.max_in_use);
    }
    EXPECT_MSG(corrupted.load() == 0, "K=" << k << ": " << corrupted.load() << " stages overwritten while in use");
  }
}

TEST("stream: acquire of the stage after the ring waits for the release of the slot's stage") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 4, 20000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 4, 20000, &bytes);
  FakeBackend be;
  be.defer = true;  // completions run only when the test says so
  StreamStore store(spec, be, 2);
  store.begin_pass();
  bool intact0 = false;
  const StageWeights* w0 = &store.acquire(0);
  be.submit([&] {
    intact0 = stage_matches_file(spec, 0, *w0);
    store.release(0);
  });
  store.acquire(1);
  be.submit([&] { store.release(1); });
  auto third = std::async(std::launch::async, [&] { return stage_matches_file(spec, 2, store.acquire(2)); });
  // Slot 0 still holds stage 0, whose work has not completed: stage 2 cannot be in it yet.
  EXPECT(third.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  EXPECT(be.complete_one());  // stage 0's work completes: its slot is released
  EXPECT(intact0);
  EXPECT(third.get());
  be.complete_all();
  store.release(2);
  store.acquire(3);
  store.release(3);
  store.end_pass();
  EXPECT(store.ring_stats().violations == 0);
  EXPECT(store.ring_stats().max_in_use == 2);
}

TEST("stream: partial preads are completed, not mistaken for errors") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 3, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 3, 30000, &bytes);
  FakeBackend be;
  StreamStore store(spec, be, 2);
  store.files().set_pread(dribbling_pread);
  for (size_t n = 0; n < 3; ++n) {
    EXPECT(stage_matches_file(spec, n, store.acquire(n)));
    store.release(n);
  }
  store.end_pass();
}

TEST("stream: a short read or an I/O error is ERR_WEIGHTS_CORRUPT at the acquire, naming file and range") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 5, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 5, 30000, &bytes);
  for (int err : {0, EIO}) {
    FakeBackend be;
    StreamStore store(spec, be, 2);
    store.files().set_pread(faulty_pread);
    g_errno = err;
    g_fail_at = (long long)(spec.stages[3].tensors[0].offset + 100);  // inside stage 3
    std::string msg;
    store.begin_pass();
    for (size_t n = 0; n < 3; ++n) {
      EXPECT(stage_matches_file(spec, n, store.acquire(n)));
      store.release(n);
    }
    EXPECT(code_of([&] { store.acquire(3); }, &msg) == Code::WeightsCorrupt);
    EXPECT_MSG(contains(msg, f.path) && contains(msg, "block.3") && contains(msg, "[" + std::to_string(spec.stages[3].tensors[0].offset)), msg);
    if (err) EXPECT_MSG(contains(msg, "error"), msg);
    store.end_pass();
    // The next pass reads again: with the fault gone it succeeds.
    g_fail_at = -1;
    store.begin_pass();
    for (size_t n = 0; n < 5; ++n) {
      EXPECT(stage_matches_file(spec, n, store.acquire(n)));
      store.release(n);
    }
    store.end_pass();
    EXPECT(store.ring_stats().violations == 0);
  }
}

TEST("stream: a file truncated after open is ERR_WEIGHTS_CORRUPT, and the store still shuts down") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 6, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 6, 30000, &bytes);
  FakeBackend be;
  be.defer = true;
  auto store = std::make_unique<StreamStore>(spec, be, 2);
  store->begin_pass();
  store->acquire(0);
  be.submit([&] { store->release(0); });
  EXPECT(f.truncate_to(size_t(spec.stages[2].tensors[0].offset + 10)));
  be.complete_all();
  std::string msg;
  Code c = code_of([&] {
    for (size_t n = 1; n < 6; ++n) {
      store->acquire(n);
      store->release(n);
    }
  }, &msg);
  EXPECT_MSG(c == Code::WeightsCorrupt, msg);
  EXPECT_MSG(contains(msg, f.path) && contains(msg, "block.2"), msg);
  store.reset();  // the prefetch thread may be mid-pass: joining must not hang
  EXPECT(be.live_buffers == 0);
}

TEST("stream: shutdown with a slot still held by in-flight work waits for it, then frees") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 5, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 5, 30000, &bytes);
  FakeBackend be;
  be.defer = true;
  bool released = false;
  {
    StreamStore store(spec, be, 3);
    store.begin_pass();
    store.acquire(0);
    be.submit([&] {
      released = true;
      store.release(0);
    });
  }
  EXPECT(released);  // the destructor let the pending work finish first
  EXPECT(be.live_buffers == 0);
}

TEST("stores: a file shorter than the spec is ERR_WEIGHTS_CORRUPT at open") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 4, 30000, &bytes);
  auto data = pattern(0, bytes);
  data.resize(size_t(spec.stages[3].tensors[1].offset));  // cut inside the last stage
  TempFile f(data);
  spec = sequential_tower(f.path, 4, 30000, &bytes);
  FakeBackend be;
  std::string msg;
  EXPECT(code_of([&] { StreamStore s(spec, be, 2); }, &msg) == Code::WeightsCorrupt);
  EXPECT_MSG(contains(msg, f.path) && contains(msg, spec.stages[3].tensors[1].name), msg);
  EXPECT(code_of([&] { make_mapped_store(spec, be); }, &msg) == Code::WeightsCorrupt);
  EXPECT_MSG(contains(msg, f.path), msg);
  EXPECT(be.live_buffers == 0);
  EXPECT(code_of([&] { StreamStore s(spec, be, 0); }) == Code::InvalidArgument);
}

TEST("mapped: views equal the file, and a file truncated after open is ERR_WEIGHTS_CORRUPT, not SIGBUS (Windows: cannot be)") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 5, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 5, 30000, &bytes);
  FakeBackend be;
  {
    auto store = make_mapped_store(spec, be);
    EXPECT(std::string(store->residency()) == "mapped");
    for (size_t n = 0; n < 5; ++n) {
      EXPECT(stage_matches_file(spec, n, store->acquire(n)));
      store->release(n);
    }
    for (const auto& wr : be.wrapped) EXPECT(uintptr_t(wr.first) % page_size() == 0 && wr.second % page_size() == 0);
#if defined(_WIN32)
    // Windows refuses to truncate a mapped file: the views stay whole.
    EXPECT(!f.truncate_to(size_t(spec.stages[3].tensors[0].offset)));
    EXPECT(stage_matches_file(spec, 3, store->acquire(3)));
#else
    EXPECT(f.truncate_to(size_t(spec.stages[3].tensors[0].offset)));
    EXPECT(stage_matches_file(spec, 1, store->acquire(1)));
    std::string msg;
    EXPECT(code_of([&] { store->acquire(3); }, &msg) == Code::WeightsCorrupt);
    EXPECT_MSG(contains(msg, f.path), msg);
#endif
  }
  EXPECT(be.live_buffers == 0);
}

TEST("stores: resident, mapped and stream (K = 1..4) hand out the same bytes at the same alignments") {
  // Two files (a sharded checkpoint), stages spanning both, tensors listed out of file order.
  std::vector<unsigned char> a = pattern(0, 200000), b = pattern(1, 150000);
  TempFile fa(a), fb(b);
  TowerSpec spec;
  spec.files = {fa.path, fb.path};
  uint64_t at0 = 8, at1 = 24;
  for (int s = 0; s < 6; ++s) {
    StageSpec st;
    st.name = "block." + std::to_string(s);
    st.kind = "block";
    st.index = s;
    int64_t n = 5000 + 1000 * (s % 3);
    st.tensors.push_back(tensor("late", 0, at0 + uint64_t(n) * 2, 33));
    st.tensors.push_back(tensor("early", 0, at0, n));
    st.tensors.push_back(tensor("other", 1, at1, n / 2 + 1, s % 2 ? DType::F32 : DType::F16));
    at0 += uint64_t(n) * 2 + 66 + 40;  // a 40-byte gap: read along
    at1 += uint64_t(n / 2 + 1) * 4 + 4096;  // a big gap: a separate run
    spec.stages.push_back(st);
  }
  FakeBackend be;
  auto address = [](const backend::Tensor& t) { return uintptr_t(static_cast<char*>(t.buf->host) + t.offset); };
  std::vector<std::unique_ptr<WeightStore>> stores;
  stores.push_back(make_resident_store(spec, be));
  stores.push_back(make_mapped_store(spec, be));
  for (int k = 1; k <= 4; ++k) stores.push_back(make_stream_store(spec, be, k));
  for (auto& s : stores) s->begin_pass();
  for (size_t n = 0; n < spec.stages.size(); ++n) {
    std::vector<const StageWeights*> ws;
    for (auto& s : stores) ws.push_back(&s->acquire(n));
    for (const auto& t : spec.stages[n].tensors) {
      const backend::Tensor& ref = ws[0]->get(t.role);
      for (size_t i = 0; i < ws.size(); ++i) {
        const backend::Tensor& x = ws[i]->get(t.role);
        EXPECT_MSG(std::memcmp(ws[i]->host(t.role), ws[0]->host(t.role), t.length) == 0, stores[i]->residency() << " " << t.role);
        EXPECT_MSG(address(x) % 64 == address(ref) % 64 && address(x) % 64 == t.offset % 64, stores[i]->residency());
        EXPECT(x.rows == ref.rows && x.cols == ref.cols && x.dtype == ref.dtype);
      }
    }
    EXPECT(stage_matches_file(spec, n, *ws[0]));
    for (auto& s : stores) s->release(n);
  }
  for (auto& s : stores) s->end_pass();
  stores.clear();
  EXPECT(be.live_buffers == 0);
}

TEST("stream: a stage abandoned by an error between acquire and submit does not block the next pass") {
  uint64_t bytes = 0;
  TowerSpec spec = sequential_tower("", 5, 30000, &bytes);
  TempFile f(pattern(0, bytes));
  spec = sequential_tower(f.path, 5, 30000, &bytes);
  FakeBackend be;
  StreamStore store(spec, be, 2);
  for (int pass = 0; pass < 3; ++pass) {
    store.begin_pass();
    size_t n = 0;
    try {
      for (; n < 5; ++n) {
        const StageWeights& w = store.acquire(n);
        if (n == 2) w.get("no-such-role");  // the model fails mid-stage: stage 2 is never released
        be.submit([&store, n] { store.release(n); });
      }
    } catch (const Error& e) {
      EXPECT(e.code() == Code::TensorMissing && n == 2);
    }
    be.finish();
    store.end_pass();
  }
  RingStats r = store.ring_stats();
  EXPECT(r.abandoned == 3 && r.violations == 0 && r.stray_releases == 0);
}
