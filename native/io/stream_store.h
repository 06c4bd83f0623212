// The `stream` residency (docs/design.md#residency): K page-aligned slots, each the size of the largest stage,
// filled by a prefetch thread. Stage n lives in slot n % K; while the model computes stage n the
// thread reads stages n+1 .. n+K-1 (one pread per run of stage_layout), and it refills a slot only
// after release() of the stage in it, which the backend calls once the work reading it completed.
// Read failures (short reads, a file that shrank, I/O errors) reach the acquire() that waits for
// the stage as ERR_WEIGHTS_CORRUPT; nothing hangs and nothing crashes.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/aligned.h"
#include "io/file_reader.h"
#include "io/weight_store.h"

namespace tessera {

// Slots are aligned (and sized in multiples of) max(kStageAlignment, the OS page size), so that Metal's
// newBufferWithBytesNoCopy can wrap them on any Mac.
size_t stream_slot_alignment();
// Bytes of one slot for this tower: the largest stage_layout, rounded up to the slot alignment.
// The one formula: the store allocates exactly this, and the addon's estimate reports it.
uint64_t stream_slot_bytes(const TowerSpec& spec);

// The ring's instruments, for tests and benchmarks.
struct RingStats {
  uint64_t handed_out = 0;     // acquire() calls served
  uint64_t stage_loads = 0;    // stages read into a slot
  uint64_t preads = 0;         // runs read (one pread each, short reads aside)
  uint64_t kept = 0;           // stages handed out from a slot filled in an earlier pass (no read)
  uint64_t waited = 0;         // acquire() calls that had to wait for the read
  uint64_t max_in_use = 0;     // most slots held at once
  uint64_t violations = 0;     // a slot still in use handed out or refilled: must stay 0
  uint64_t stray_releases = 0; // release() of a stage that was not held
  uint64_t abandoned = 0;      // stages still held at end_pass (acquired, then an error before submit)
};

class StreamStore final : public WeightStore {
 public:
  StreamStore(const TowerSpec& spec, backend::Backend& backend, int slots);
  ~StreamStore() override;

  const char* residency() const override { return "stream"; }
  void begin_pass() override;
  const StageWeights& acquire(size_t stage) override;
  void release(size_t stage) override;
  void end_pass() override;
  WeightStoreStats stats() const override;

  RingStats ring_stats() const;
  int slots() const { return int(slots_.size()); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  FileSet& files() { return files_; }  // tests inject faults through FileSet::set_pread

 private:
  enum class Fill { Empty, Loading, Ready, Failed };
  struct Slot {
    AlignedBuffer mem;
    backend::Buffer* buf = nullptr;
    long stage = -1;  // the stage whose bytes the slot holds (or is reading)
    Fill fill = Fill::Empty;
    bool in_use = false;  // handed out by acquire(), not yet released
    uint64_t pass = 0;    // the pass that read it
    std::string error;    // when Failed: the message of the read's ERR_WEIGHTS_CORRUPT
    int error_code = 0;
    StageWeights views;
  };

  Slot& slot_of(size_t stage) { return slots_[stage % slots_.size()]; }
  bool can_load_locked() const;
  void prefetch_loop();
  void begin_pass_locked();

  const TowerSpec spec_;
  backend::Backend& backend_;
  FileSet files_;
  std::vector<StageLayout> layouts_;
  uint64_t slot_bytes_ = 0;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool pass_active_ = false;
  uint64_t pass_ = 0;        // passes begun
  size_t next_acquire_ = 0;  // the stage the model will acquire next
  size_t next_load_ = 0;     // the stage the prefetch thread reads next
  uint64_t in_use_ = 0;
  uint64_t bytes_read_ = 0;
  RingStats ring_;
  std::thread thread_;
};

std::unique_ptr<WeightStore> make_stream_store(const TowerSpec& spec, backend::Backend& backend, int slots);

}  // namespace tessera
