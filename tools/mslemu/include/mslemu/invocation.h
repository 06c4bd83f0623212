// Included by the trampolines prepass.mjs appends to each kernel file: converts an Invocation builtin to
// the parameter's declared type (scalar, 2- or 3-vector of any integer type).
#pragma once
#include <type_traits>

#include "mslemu/abi.h"
namespace mslemu {
template <class T>
struct bconv {
  static T from(U3 v) { return T(v.x); }
  static T from(uint32_t v) { return T(v); }
};
template <class E>
struct bconv<E __attribute__((ext_vector_type(2)))> {
  typedef E V __attribute__((ext_vector_type(2)));
  static V from(U3 v) { return V{E(v.x), E(v.y)}; }
};
template <class E>
struct bconv<E __attribute__((ext_vector_type(3)))> {
  typedef E V __attribute__((ext_vector_type(3)));
  static V from(U3 v) { return V{E(v.x), E(v.y), E(v.z)}; }
};
template <class T, class V>
T builtin(V v) {
  return bconv<T>::from(v);
}
}  // namespace mslemu
namespace mslemu {
// Alignment a buffer bound to a pointer parameter must have: its element type's.
template <class P>
constexpr size_t pointee_align() {
  typedef std::remove_cv_t<std::remove_pointer_t<P>> E;
  if constexpr (std::is_void_v<E>) return 1;
  else return alignof(E);
}
}  // namespace mslemu
