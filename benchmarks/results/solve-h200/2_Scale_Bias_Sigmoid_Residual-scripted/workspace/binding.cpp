// Harness-owned: do not edit. The module's entry point: applies every REGISTER_BINDING.
#include <pybind11/pybind11.h>

#include "binding_registry.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  for (auto bind : kernel_agent::registry()) bind(m);
}
