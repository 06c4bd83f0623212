#include "addon/tower_core.h"

#include <algorithm>
#include <iterator>

#include "common/error.h"
#include "cpu/cpu_backend.h"
#include "io/weight_store_factory.h"
#include "metal/metal_backend.h"

namespace tessera::addon {

std::string precision_list() {
  std::string s;
  for (const char* p : kPrecisions) s += (s.empty() ? "" : ", ") + std::string(p);
  return s;
}

std::unique_ptr<backend::Backend> make_backend(const std::string& name, int threads, const std::string& precision) {
  if (std::find(std::begin(kPrecisions), std::end(kPrecisions), precision) == std::end(kPrecisions))
    fail(Code::InvalidArgument, "precision '" + precision + "' is not one of " + precision_list());
  // Each backend runs what it has and its precision() says what ran: the CPU has no half path (f16 runs
  // f32); Metal runs bf16 in bfloat where MSL 3.1 is there (macOS 14), else f32.
  if (name == "cpu") return cpu::make_cpu_backend(threads, precision == "bf16" ? cpu::Precision::Bf16 : cpu::Precision::F32);
  if (name == "metal" || name == "metal-emulated")
    return mtl::make_metal_backend(name, precision == "f16" ? mtl::Precision::F16 : precision == "bf16" ? mtl::Precision::Bf16 : mtl::Precision::F32);
  fail(Code::BackendUnavailable, "backend '" + name + "' is not available in this build");
}

void TowerCore::open() {
  backend = make_backend(options.backend, options.threads, options.precision);
  store = make_weight_store(spec, options.residency, *backend, options.slots);
  model = make_model(spec, *backend, *store);
  store->pack_linear_weights(model->linear_weight_roles());
}

void TowerCore::close() {
  std::lock_guard<std::mutex> lock(mu);
  closed = true;
  model.reset();
  store.reset();
  backend.reset();
}

}  // namespace tessera::addon
