// What every binding file shares: the package's own plugin folder, the plugin registry as the
// module loads it (plugin_dirs=, HEADSEP_PLUGIN_PATH, then the package's folder) and the Python
// exception classes (headsep.Error, headsep.UsageError) the C++ errors become.
#pragma once
#include <nanobind/nanobind.h>

#include <filesystem>
#include <string>
#include <vector>

#include "headsep/plugin_host.hpp"

namespace headsep::python {

/// headsep/plugins beside the extension; set once by headsep/__init__.py (_set_plugin_dir).
const std::filesystem::path& package_plugin_dir();

/// Every plugin in `dirs` (the plugin_dirs= argument; a folder that does not exist is a
/// UsageError), then HEADSEP_PLUGIN_PATH, then package_plugin_dir(). Needs no GIL.
PluginRegistry load_registry(const std::vector<std::string>& dirs);

/// headsep.Error (bad input, plugin failures: the CLI's exit status 1) and headsep.UsageError
/// (a subclass of both headsep.Error and ValueError: bad arguments, the CLI's exit status 2).
/// C++ exceptions thrown through nanobind are translated by the translator bind_core registers:
/// UsageError -> headsep.UsageError, Error (InputError, PluginError) -> headsep.Error,
/// Interrupted -> KeyboardInterrupt.
nanobind::handle error_type();
nanobind::handle usage_error_type();

}  // namespace headsep::python
