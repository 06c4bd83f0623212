#include "models/gemma4/clippable.h"

#include "common/error.h"

namespace tessera::gemma4 {

float scalar(const StageWeights& w, const std::string& role, float fallback) {
  const backend::Tensor* t = w.find(role);
  if (!t) return fallback;
  float v;
  widen_to_f32(w.host(role), t->dtype, &v, 1);
  return v;
}

backend::LinearArgs clamps(const StageWeights& w, const std::string& lin) {
  backend::LinearArgs a;
  if (const backend::Tensor* t = w.find(lin + ".clamp")) {
    if (t->dtype != DType::F32 || t->elements() != 4)
      fail(Code::TensorShape, "packed clamp '" + lin + ".clamp' must be 4 f32 values");
    float c[4];
    widen_to_f32(w.host(lin + ".clamp"), DType::F32, c, 4);
    if (c[0] != 0.0f || c[1] != 0.0f || c[2] != 0.0f || c[3] != 0.0f) {
      a.in_min = c[0], a.in_max = c[1], a.out_min = c[2], a.out_max = c[3];
      return a;
    }
  }
  a.in_min = scalar(w, lin + ".input_min", a.in_min);
  a.in_max = scalar(w, lin + ".input_max", a.in_max);
  a.out_min = scalar(w, lin + ".output_min", a.out_min);
  a.out_max = scalar(w, lin + ".output_max", a.out_max);
  return a;
}

}  // namespace tessera::gemma4
