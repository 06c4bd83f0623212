// What one opened tower owns: the backend, the weight store and the model, plus the lock that
// keeps encodes on one tower from overlapping (TS queues them too; this is the safety net).
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "io/tower_spec.h"
#include "io/weight_store.h"
#include "models/vision_model.h"

namespace tessera::addon {

// The precisions a tower can be opened with: the one list (src/options.ts PRECISIONS is checked against the
// addon's `precisions`, test/api-precision.test.ts). What each backend runs for each: docs/bf16.md, docs/metal.md.
inline constexpr const char* kPrecisions[] = {"f32", "bf16", "f16"};
std::string precision_list();  // "f32, bf16, f16"

struct OpenOptions {
  std::string backend = "cpu";
  std::string residency = "resident";
  int threads = 0;
  int slots = 2;
  std::string precision = "f32";  // one of kPrecisions (Backend::precision says what runs)
};

struct TowerCore {
  TowerSpec spec;
  OpenOptions options;
  std::unique_ptr<backend::Backend> backend;
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<VisionModel> model;
  std::mutex mu;
  bool closed = false;

  // Builds everything (reads weights for `resident`): runs on a worker thread.
  void open();
  void close();  // frees everything; later calls fail with ERR_CLOSED
};

std::unique_ptr<backend::Backend> make_backend(const std::string& name, int threads, const std::string& precision);

}  // namespace tessera::addon
