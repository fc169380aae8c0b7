// Harness-owned: do not edit. Lets each kernels/*_binding.cpp register its functions with the
// one Python module the harness builds, so adding a kernel never touches a shared file.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

namespace kernel_agent {

using BindingFn = void (*)(pybind11::module_&);

inline std::vector<BindingFn>& registry() {
  static std::vector<BindingFn> functions;
  return functions;
}

struct Registrar {
  explicit Registrar(BindingFn fn) { registry().push_back(fn); }
};

}  // namespace kernel_agent

// REGISTER_BINDING(name) { m.def("name", &function, "doc"); }
#define REGISTER_BINDING(name)                                                          \
  static void kernel_agent_bind_##name(pybind11::module_& m);                           \
  static ::kernel_agent::Registrar kernel_agent_registrar_##name(&kernel_agent_bind_##name); \
  static void kernel_agent_bind_##name(pybind11::module_& m)
