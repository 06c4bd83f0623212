#include "common/error.h"

namespace tessera {

const char* code_name(Code code) {
  switch (code) {
    case Code::ModelNotFound: return "ERR_MODEL_NOT_FOUND";
    case Code::ModelFormat: return "ERR_MODEL_FORMAT";
    case Code::ConfigInvalid: return "ERR_CONFIG_INVALID";
    case Code::TensorMissing: return "ERR_TENSOR_MISSING";
    case Code::TensorShape: return "ERR_TENSOR_SHAPE";
    case Code::WeightsCorrupt: return "ERR_WEIGHTS_CORRUPT";
    case Code::ImageDecode: return "ERR_IMAGE_DECODE";
    case Code::ImageTooLarge: return "ERR_IMAGE_TOO_LARGE";
    case Code::ImageAspect: return "ERR_IMAGE_ASPECT";
    case Code::InvalidArgument: return "ERR_INVALID_ARGUMENT";
    case Code::Aborted: return "ERR_ABORTED";
    case Code::Closed: return "ERR_CLOSED";
    case Code::BackendUnavailable: return "ERR_BACKEND_UNAVAILABLE";
    case Code::OutOfMemory: return "ERR_OUT_OF_MEMORY";
    case Code::Gpu: return "ERR_GPU";
    case Code::Numeric: return "ERR_NUMERIC";
    case Code::Internal: return "ERR_INTERNAL";
  }
  return "ERR_INTERNAL";
}

}  // namespace tessera
