// Private to the Python plugins: what one registration owns (PyPlugin: the object, the strings
// its descriptor points to) and the C ABI functions that call into Python (python_plugin_calls.cpp).
#pragma once
#include <nanobind/nanobind.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"

namespace headsep::python {

// One registration: the InProcessPlugin's owner and user pointer. The descriptor points into it.
struct PyPlugin {
  nanobind::object obj;  // the user's instance
  nanobind::object helpers;  // the headsep.python_plugins module (chunk and weights normalisation)
  PluginKind kind = PluginKind::scenario;
  std::string name, version, description, origin;
  std::vector<std::string> param_names, param_defaults, param_helps;
  std::vector<ParamType> param_types;
  std::vector<headsep_param_spec> specs;
  /// Set when a call of the object raised KeyboardInterrupt (the call fails like any other);
  /// headsep.run then raises KeyboardInterrupt -- once -- instead of the plugin's error. Shared by
  /// the plugins of one run (register_python_plugin's `interrupted`); null: not watched.
  std::shared_ptr<std::atomic<bool>> interrupted;
  ~PyPlugin();  // drops the references under the GIL (or leaks them once the interpreter is gone)
};

/// The descriptor of a Python plugin of `p`'s kind, pointing into `p` (strings, parameter table).
headsep_plugin_descriptor python_descriptor(const PyPlugin& p);

}  // namespace headsep::python
