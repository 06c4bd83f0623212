#include "io/mapped_store.h"

#include <algorithm>

#include "common/aligned.h"
#include "common/error.h"
#include "common/platform.h"
#include "io/file_reader.h"
#include "io/spec_bounds.h"

namespace tessera {
namespace {

struct Mapping {
  char* base = nullptr;
  size_t bytes = 0;  // the file's size at open (the mapping covers it rounded up to pages)
};

// One stage's window into one file: [begin, end) page-rounded, wrapped as one backend buffer.
struct Window {
  int file = 0;
  size_t begin = 0, end = 0;
  backend::Buffer* buf = nullptr;
};

class MappedStore final : public WeightStore {
 public:
  MappedStore(const TowerSpec& spec, backend::Backend& backend) : spec_(spec), backend_(backend), files_(spec.files) {
    std::vector<uint64_t> sizes;
    for (size_t f = 0; f < files_.count(); ++f) sizes.push_back(files_.size(int(f)));
    check_tensors_within_files(spec_, sizes);  // a mapping past the end would fault (SIGBUS), so refuse now
    try {
      map_files();
      wrap_stages();
    } catch (...) {
      teardown();
      throw;
    }
  }
  ~MappedStore() override { teardown(); }

  const char* residency() const override { return "mapped"; }

  const StageWeights& acquire(size_t n) override {
    if (n >= spec_.stages.size())
      fail(Code::Internal, "internal: acquire of stage " + std::to_string(n) + " of " + std::to_string(spec_.stages.size()));
    // A file that shrank since open would fault when the stage's pages are touched: look first
    // (one size query per file of the stage; the race left is as narrow as it can be without copying).
    // Windows refuses to truncate a mapped file, so there the check never finds one.
    std::vector<uint64_t> now(files_.count(), 0);
    for (const auto& w : windows_[n]) {
      if (!platform::file_size(files_.handle(w.file), &now[size_t(w.file)]))
        fail(Code::WeightsCorrupt, "cannot stat '" + files_.path(w.file) + "': " + platform::last_error());
    }
    for (size_t f = 0; f < now.size(); ++f)
      if (!now[f]) now[f] = files_.size(int(f));  // files this stage does not use
    check_tensors_within_files(spec_, now, long(n));
    if (n + 1 < spec_.stages.size())
      for (const auto& w : windows_[n + 1])
        platform::advise_willneed(maps_[size_t(w.file)].base + w.begin, w.end - w.begin);
    return views_[n];
  }
  void release(size_t) override {}
  WeightStoreStats stats() const override { return stats_; }

 private:
  void map_files() {
    const size_t page = page_size();
    for (size_t f = 0; f < files_.count(); ++f) {
      Mapping m;
      m.bytes = size_t(files_.size(int(f)));
      if (m.bytes) {
        void* p = platform::map_file(files_.handle(int(f)), round_up(m.bytes, page));
        if (!p)
          fail(Code::OutOfMemory, "cannot map '" + files_.path(int(f)) + "' (" + std::to_string(m.bytes) +
                                      " bytes): " + platform::last_error());
        m.base = static_cast<char*>(p);
        platform::advise_sequential(m.base, round_up(m.bytes, page));
      }
      maps_.push_back(m);
    }
  }

  void wrap_stages() {
    const size_t page = page_size();
    windows_.resize(spec_.stages.size());
    views_.resize(spec_.stages.size());
    for (size_t n = 0; n < spec_.stages.size(); ++n) {
      const StageSpec& st = spec_.stages[n];
      auto& wins = windows_[n];
      for (const auto& t : st.tensors) {
        if (held_apart(t)) continue;  // copied below, never viewed
        auto it = std::find_if(wins.begin(), wins.end(), [&](const Window& w) { return w.file == t.file; });
        size_t b = size_t(t.offset) / page * page, e = round_up(size_t(t.offset + t.length), page);
        if (it == wins.end())
          wins.push_back({t.file, b, e, nullptr});
        else
          it->begin = std::min(it->begin, b), it->end = std::max(it->end, e);
      }
      for (auto& w : wins) {
        if (w.end == w.begin) {  // only empty tensors: still wrap a valid page of the mapping
          w.begin = w.begin >= page ? w.begin - page : 0;
          w.end = w.begin + page;
        }
        w.buf = backend_.wrap_host(maps_[size_t(w.file)].base + w.begin, w.end - w.begin);
      }
      // Quantised tensors are widened now, once, into memory of the store's own (kernels read f32),
      // and assembled ones gathered there (their pieces lie apart in the file).
      std::vector<uint64_t> at;
      const uint64_t own = held_stage_bytes(st, &at);
      backend::Buffer* own_buf = nullptr;
      if (own) {
        own_.push_back({AlignedBuffer(own), nullptr});
        Owned& o = own_.back();
        for (size_t i = 0; i < st.tensors.size(); ++i)
          if (held_apart(st.tensors[i]))
            copy_held(st.tensors[i], maps_[size_t(st.tensors[i].file)].base, o.mem.as<char>() + at[i]);
        own_buf = o.buf = backend_.wrap_host(o.mem.data(), o.mem.size());
        stats_.resident_bytes += own;
      }
      for (size_t i = 0; i < st.tensors.size(); ++i) {
        const TensorSpec& t = st.tensors[i];
        if (held_apart(t)) {
          views_[n].set(t.role, tensor_view(t, own_buf, size_t(at[i])));
          continue;
        }
        auto it = std::find_if(wins.begin(), wins.end(), [&](const Window& w) { return w.file == t.file; });
        views_[n].set(t.role, tensor_view(t, it->buf, size_t(t.offset) - it->begin));
      }
    }
  }

  void teardown() {
    for (auto& o : own_)
      if (o.buf) backend_.release(o.buf), o.buf = nullptr;
    for (auto& wins : windows_)
      for (auto& w : wins)
        if (w.buf) backend_.release(w.buf), w.buf = nullptr;
    for (auto& m : maps_)
      if (m.base) platform::unmap_file(m.base, round_up(m.bytes, page_size())), m.base = nullptr;
  }

  const TowerSpec spec_;
  backend::Backend& backend_;
  FileSet files_;
  std::vector<Mapping> maps_;
  std::vector<std::vector<Window>> windows_;
  std::vector<StageWeights> views_;
  struct Owned {
    AlignedBuffer mem;
    backend::Buffer* buf = nullptr;
  };
  std::vector<Owned> own_;   // the widened quantised tensors, per stage that has any
  WeightStoreStats stats_;   // resident_bytes: own_'s memory; no reads (the page cache's)
};

}  // namespace

std::unique_ptr<WeightStore> make_mapped_store(const TowerSpec& spec, backend::Backend& backend) {
  return std::make_unique<MappedStore>(spec, backend);
}

}  // namespace tessera
