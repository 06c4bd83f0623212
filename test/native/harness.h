// A tiny table-test harness for native code (kernels, io, image): each TEST registers itself;
// build/native-tests/native_tests (scripts/native-tests.mjs) runs them all (or those whose name contains argv[1]) and ends with
// the plain "N passed, N failed" line. test/native-tables.test.ts runs it from vitest.
#pragma once
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace harness {

struct Case {
  const char* name;
  std::function<void()> fn;
};
std::vector<Case>& registry();
struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};
struct Failure {
  std::string message;
};
[[noreturn]] inline void failed(const char* file, int line, const std::string& what) {
  std::ostringstream s;
  s << file << ":" << line << ": " << what;
  throw Failure{s.str()};
}

}  // namespace harness

#define HARNESS_CAT2(a, b) a##b
#define HARNESS_CAT(a, b) HARNESS_CAT2(a, b)
#define TEST(name)                                                              \
  static void HARNESS_CAT(test_fn_, __LINE__)();                                \
  static harness::Register HARNESS_CAT(test_reg_, __LINE__)(name, HARNESS_CAT(test_fn_, __LINE__)); \
  static void HARNESS_CAT(test_fn_, __LINE__)()

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) harness::failed(__FILE__, __LINE__, "expected " #cond); \
  } while (0)

#define EXPECT_MSG(cond, msg)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::ostringstream _s;                                                               \
      _s << "expected " #cond ": " << msg;                                                 \
      harness::failed(__FILE__, __LINE__, _s.str());                                       \
    }                                                                                      \
  } while (0)

// |a - b| <= tol * max(1, |b|)
#define EXPECT_NEAR(a, b, tol)                                                             \
  do {                                                                                     \
    double _a = (a), _b = (b);                                                             \
    if (!(std::fabs(_a - _b) <= (tol) * std::fmax(1.0, std::fabs(_b))) || std::isnan(_a))  \
      EXPECT_MSG(false, #a " = " << _a << " vs " #b " = " << _b);                          \
  } while (0)
