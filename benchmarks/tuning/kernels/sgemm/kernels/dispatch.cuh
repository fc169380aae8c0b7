// Runtime value -> compile-time constant: calls f(std::integral_constant<int, V>{}) for the V in
// Vs equal to v and returns true, or returns false when v is none of them.
#pragma once
#include <type_traits>

template <int... Vs, typename F>
inline bool dispatch_int(int v, F&& f) {
  return ((v == Vs ? (f(std::integral_constant<int, Vs>{}), true) : false) || ...);
}
