#include "io/stream_store.h"

#include <algorithm>
#include <exception>

#include "common/error.h"
#include "io/spec_bounds.h"
#include "io/weight_alignment.h"

namespace tessera {

size_t stream_slot_alignment() { return std::max<size_t>(kStageAlignment, page_size()); }

uint64_t stream_slot_bytes(const TowerSpec& spec) {
  uint64_t largest = 0;
  for (const auto& st : spec.stages) largest = std::max(largest, stage_layout(st).bytes);
  return round_up(std::max<uint64_t>(largest, 1), stream_slot_alignment());
}

StreamStore::StreamStore(const TowerSpec& spec, backend::Backend& backend, int slots)
    : spec_(spec), backend_(backend), files_(spec.files) {
  if (slots < 1 || slots > 64)
    fail(Code::InvalidArgument, "slots must be between 1 and 64, got " + std::to_string(slots));
  if (spec_.stages.empty()) fail(Code::InvalidArgument, "a tower with no stages cannot be streamed");
  std::vector<uint64_t> sizes;
  for (size_t f = 0; f < files_.count(); ++f) sizes.push_back(files_.size(int(f)));
  check_tensors_within_files(spec_, sizes);

  for (const auto& st : spec_.stages) layouts_.push_back(stage_layout(st));
  slot_bytes_ = stream_slot_bytes(spec_);
  slots_.resize(size_t(slots));
  try {
    for (auto& s : slots_) {
      s.mem = AlignedBuffer(slot_bytes_, stream_slot_alignment());
      s.buf = backend_.wrap_host(s.mem.data(), slot_bytes_);  // wrapped once, for the store's life
    }
  } catch (...) {
    for (auto& s : slots_)
      if (s.buf) backend_.release(s.buf);
    throw;
  }
  thread_ = std::thread([this] { prefetch_loop(); });
}

StreamStore::~StreamStore() {
  bool held = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    held = in_use_ > 0;
  }
  // A slot still held means work reading it may be in flight: let it finish (its completion
  // calls release() on this store) before the memory goes away.
  if (held) {
    try {
      backend_.finish();
    } catch (...) {
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // at most one pread in flight: bounded
  for (auto& s : slots_)
    if (s.buf) backend_.release(s.buf);
}

void StreamStore::begin_pass() {
  std::lock_guard<std::mutex> lk(mu_);
  begin_pass_locked();
  cv_.notify_all();
}

void StreamStore::begin_pass_locked() {
  pass_active_ = true;
  ++pass_;
  next_acquire_ = 0;
  next_load_ = 0;
  for (auto& s : slots_)  // a failed read is retried in the new pass (and fails again if still bad)
    if (s.fill == Fill::Failed) {
      s.fill = Fill::Empty;
      s.stage = -1;
    }
}

void StreamStore::end_pass() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Stages read ahead stay in their slots (a later pass may find them there). The backend has
    // finished the pass's work (weight_store.h), so a stage still held was abandoned between
    // acquire and submit (an error): its slot returns to the ring instead of blocking it forever.
    pass_active_ = false;
    for (auto& s : slots_)
      if (s.in_use) {
        s.in_use = false;
        --in_use_;
        ++ring_.abandoned;
      }
  }
  cv_.notify_all();
}

// The prefetch thread may read stage next_load_ into its slot once (a) the model has been handed
// every stage up to next_load_ - K, i.e. the slot's previous stage is no longer waiting to be
// acquired, and (b) that stage has been released.
bool StreamStore::can_load_locked() const {
  if (!pass_active_ || next_load_ >= spec_.stages.size()) return false;
  if (next_load_ >= next_acquire_ + slots_.size()) return false;
  const Slot& s = slots_[next_load_ % slots_.size()];
  return !s.in_use && s.fill != Fill::Loading;
}

void StreamStore::prefetch_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || can_load_locked(); });
    if (stop_) return;
    const size_t n = next_load_++;
    Slot& s = slot_of(n);
    if (s.stage == long(n) && s.fill == Fill::Ready) continue;  // still there from an earlier pass
    if (s.in_use) ++ring_.violations;  // cannot happen: can_load_locked() waited for release
    s.stage = long(n);
    s.fill = Fill::Loading;
    s.pass = pass_;
    lk.unlock();

    // Read outside the lock: acquire() of the stage before, release() and shutdown stay responsive.
    std::string error;
    int code = 0;
    uint64_t bytes = 0, reads = 0;
    try {
      for (const auto& run : layouts_[n].runs) {
        reads += read_run(files_, run, s.mem.as<char>());
        bytes += run.length;
      }
      bind_stage(spec_.stages[n], s.buf, 0, s.views);
    } catch (const Error& e) {
      error = e.what();
      code = int(e.code());
    } catch (const std::exception& e) {
      error = std::string("reading stage '") + spec_.stages[n].name + "': " + e.what();
      code = int(Code::Internal);
    }

    lk.lock();
    bytes_read_ += bytes;
    ring_.preads += reads;
    ++ring_.stage_loads;
    if (code) {
      s.fill = Fill::Failed;
      s.error = "stage '" + spec_.stages[n].name + "': " + error;
      s.error_code = code;
    } else {
      s.fill = Fill::Ready;
    }
    cv_.notify_all();
  }
}

const StageWeights& StreamStore::acquire(size_t n) {
  std::unique_lock<std::mutex> lk(mu_);
  if (n >= spec_.stages.size())
    fail(Code::Internal, "internal: acquire of stage " + std::to_string(n) + " of " + std::to_string(spec_.stages.size()));
  if (!pass_active_) begin_pass_locked();  // a model that does not call begin_pass()
  if (n < next_acquire_)
    fail(Code::Internal, "internal: stage " + std::to_string(n) + " acquired after stage " +
                             std::to_string(next_acquire_ - 1) + " in one pass");
  if (n > next_acquire_) {  // stages skipped: nothing will acquire them in this pass
    next_acquire_ = n;
    next_load_ = std::max(next_load_, n);
  }
  cv_.notify_all();
  Slot& s = slot_of(n);
  auto ready = [&] { return stop_ || (s.stage == long(n) && (s.fill == Fill::Ready || s.fill == Fill::Failed) && !s.in_use); };
  if (!ready()) {
    ++ring_.waited;
    cv_.wait(lk, ready);
  }
  if (stop_) fail(Code::Closed, "the weight store is shutting down");
  if (s.fill == Fill::Failed) {
    Code code = Code(s.error_code);
    std::string msg = s.error;
    s.fill = Fill::Empty;  // not kept: the next pass reads it again
    s.stage = -1;
    next_acquire_ = n + 1;
    cv_.notify_all();
    fail(code, msg);
  }
  if (s.in_use) ++ring_.violations;  // cannot happen: ready() waited
  if (s.pass != pass_) ++ring_.kept;
  s.in_use = true;
  ++in_use_;
  ring_.max_in_use = std::max(ring_.max_in_use, in_use_);
  ++ring_.handed_out;
  next_acquire_ = n + 1;
  cv_.notify_all();  // the prefetch window moved
  return s.views;
}

void StreamStore::release(size_t n) {
  // Called from a backend's completion, on any thread: never throws.
  {
    std::lock_guard<std::mutex> lk(mu_);
    Slot& s = slots_[n % slots_.size()];
    if (s.stage != long(n) || !s.in_use) {
      ++ring_.stray_releases;
      return;
    }
    s.in_use = false;
    --in_use_;
  }
  cv_.notify_all();
}

WeightStoreStats StreamStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  WeightStoreStats st;
  st.bytes_read = bytes_read_;
  st.resident_bytes = slot_bytes_ * slots_.size();
  st.reads = ring_.preads;
  st.violations = ring_.violations;
  return st;
}

RingStats StreamStore::ring_stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return ring_;
}

std::unique_ptr<WeightStore> make_stream_store(const TowerSpec& spec, backend::Backend& backend, int slots) {
  return std::make_unique<StreamStore>(spec, backend, slots);
}

}  // namespace tessera
