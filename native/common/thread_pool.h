// A fixed pool of worker threads that partitions loops; no per-op thread spawning.
// parallel_for(n, fn) calls fn(begin, end) on disjoint chunks covering [0, n), the caller's
// thread taking a share, and returns when all chunks are done. Not re-entrant: one loop at a time.
// Between loops a worker spins briefly before it sleeps (and the caller spins briefly on the last
// chunk): a model issues its ops back to back, and a futex wake-up costs tens of microseconds on a
// VM, which at a few hundred patches is several per cent of a block.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: physical cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Splits [0, n) into size() contiguous ranges (fewer when n is small, at least `grain` each).
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain = 1);

  // Runs fn(t) for t in [0, tasks): each task on one thread, tasks handed out dynamically.
  void run_tasks(size_t tasks, const std::function<void(size_t)>& fn);

  static int physical_cores();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t tasks_ = 0, next_ = 0;
  std::atomic<size_t> finished_{0};    // written under mu_; read by the spinning caller
  std::atomic<uint64_t> generation_{0};  // written under mu_; read by spinning workers
  bool stop_ = false;
};

}  // namespace tessera
