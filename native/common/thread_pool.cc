#include "common/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/platform.h"

namespace tessera {

int ThreadPool::physical_cores() {
  // Hyperthreads share a core's FMA units, so more threads than cores only adds contention.
  if (int n = platform::physical_cores(); n > 0) return n;
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = physical_cores();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// How long a thread spins for the next loop (worker) or the last chunk (caller) before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(100);

template <class Ready>
bool spin_until(Ready ready) {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > end) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
}
}  // namespace

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (generation_ == seen && !stop_) {
      lock.unlock();
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
      lock.lock();
    }
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_ < tasks_) {
      size_t t = next_++;
      const auto* fn = task_;
      lock.unlock();
      (*fn)(t);
      lock.lock();
      if (++finished_ == tasks_) done_.notify_all();
    }
  }
}

void ThreadPool::run_tasks(size_t tasks, const std::function<void(size_t)>& fn) {
  if (tasks == 0) return;
  if (workers_.empty() || tasks == 1) {
    for (size_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &fn;
  tasks_ = tasks;
  next_ = 0;
  finished_ = 0;
  ++generation_;
  wake_.notify_all();
  while (next_ < tasks_) {
    size_t t = next_++;
    lock.unlock();
    fn(t);
    lock.lock();
    ++finished_;
  }
  if (finished_ != tasks_) {
    lock.unlock();
    spin_until([&] { return finished_.load(std::memory_order_acquire) == tasks_; });
    lock.lock();
  }
  done_.wait(lock, [&] { return finished_ == tasks_; });
  task_ = nullptr;
  tasks_ = 0;
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t parts = std::min<size_t>(size_t(size()), (n + grain - 1) / grain);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  size_t chunk = (n + parts - 1) / parts;
  run_tasks(parts, [&](size_t p) {
    size_t b = p * chunk, e = std::min(n, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace tessera
