// Plugins written in Python: a headsep.ScenarioGenerator or headsep.WeightingScheme instance
// becomes an in-process plugin (PluginRegistry::add) whose C ABI functions call the object with
// the GIL held only inside each call; the host checks it like a .so (docs/PYTHON.md).
#pragma once
#include <nanobind/nanobind.h>

#include <atomic>
#include <memory>
#include <string>

#include "headsep/plugin_host.hpp"

namespace headsep::python {

/// Registers `obj` (an instance of a headsep.ScenarioGenerator or headsep.WeightingScheme
/// subclass) in `registry` and returns the name to open it by. Its class attributes declare the
/// name (default: the class name in kebab-case), version, description and parameters; the host
/// checks them as it checks a .so's descriptor (PluginError, i.e. headsep.Error, naming "Python
/// class MODULE.CLASS"). Another object of the same name replaces an earlier one in the registry.
/// TypeError when `obj` is not such an instance or declares a parameter of another type. Needs
/// the GIL; the registry keeps a reference to `obj` (released under the GIL).
/// `interrupted`, when given, is set when a call of the object raises KeyboardInterrupt.
std::string register_python_plugin(headsep::PluginRegistry& registry, nanobind::handle obj,
                                   std::shared_ptr<std::atomic<bool>> interrupted = nullptr);

}  // namespace headsep::python
