// Coded errors. Native code throws tessera::Error internally; the addon catches every exception
// at the N-API boundary and turns it into a rejected promise carrying { code, message }, which
// src/errors.ts wraps in a TesseraError. Nothing ever crosses the boundary as a C++ exception.
#pragma once
#include <exception>
#include <string>

namespace tessera {

enum class Code {
  ModelNotFound,
  ModelFormat,
  ConfigInvalid,
  TensorMissing,
  TensorShape,
  WeightsCorrupt,
  ImageDecode,
  ImageTooLarge,
  ImageAspect,
  InvalidArgument,
  Aborted,
  Closed,
  BackendUnavailable,
  OutOfMemory,
  Gpu,
  Numeric,
  Internal,  // stays last: kCodeCount counts up to it
};

// Every code, 0 .. kCodeCount - 1: the addon reports their names (addon().errorCodes), and a test
// holds them against src/errors.ts's ERROR_CODES, so that no code reaches TypeScript unknown.
constexpr int kCodeCount = static_cast<int>(Code::Internal) + 1;

// The stable string codes of docs/design.md#errors ("ERR_WEIGHTS_CORRUPT", ...).
const char* code_name(Code code);

class Error : public std::exception {
 public:
  Error(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code() const { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  Code code_;
  std::string message_;
};

[[noreturn]] inline void fail(Code code, std::string message) { throw Error(code, std::move(message)); }

// Internal invariant: a failure here is a bug in tessera (never bad input), reported as ERR_INTERNAL.
#define TESSERA_CHECK(cond, msg)                                                          \
  do {                                                                                    \
    if (!(cond)) ::tessera::fail(::tessera::Code::Internal, std::string("internal: ") + (msg)); \
  } while (0)

}  // namespace tessera
