// bind_cli: `headsep` as the pip package installs it (the console script and `python -m headsep`,
// python/headsep/_cli.py) is the executable's app itself (cli::run_cli, runtime/cli/main.cpp),
// run in the interpreter's process with the package's plugin folder, plus the `.py` plugins of
// --plugin-dir and HEADSEP_PLUGIN_PATH registered as in-process plugins (python_plugins.hpp).
// One process: the extension links the app without MPI (headsep_dist_local).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cli/options.hpp"
#include "core.hpp"
#include "headsep/error.hpp"
#include "python_plugins.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

// The .py plugins of `dirs` (headsep._cli.plugin_objects imports each file and instantiates its
// plugin classes) registered in `reg`. Called by the app with the GIL released: takes it here.
// A file that fails (import error, a class the host refuses) stops the command with its message,
// naming the file: a plugin the user wrote is never skipped silently.
void add_python_plugins(PluginRegistry& reg, const std::vector<std::filesystem::path>& dirs) {
  nb::gil_scoped_acquire gil;
  std::vector<std::string> folders;
  for (const auto& d : dirs) folders.push_back(d.string());
  nb::object found;
  try {
    found = nb::module_::import_("headsep._cli").attr("plugin_objects")(folders);
  } catch (const nb::python_error& e) {  // plugin_objects' RuntimeError: "could not load FILE: why"
    throw PluginError(nb::cast<std::string>(nb::str(e.value())));
  }
  for (nb::handle item : found) {
    const std::string file = nb::cast<std::string>(item[0]);
    try {
      register_python_plugin(reg, item[1]);
    } catch (const PluginError& e) {
      throw PluginError(file + ": " + e.what());
    } catch (const nb::python_error& e) {
      throw PluginError(file + ": " + nb::cast<std::string>(nb::str(e.value())));
    } catch (const nb::builtin_exception& e) {
      throw PluginError(file + ": " + e.what());
    }
  }
}

int cli_main(const std::vector<std::string>& args) {
  std::vector<std::string> words = args;
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  cli::PluginHost host;
  host.builtin = package_plugin_dir();
  host.add = &add_python_plugins;
  nb::gil_scoped_release unlocked;  // Python plugins take it on the engine's threads
  return cli::run_cli(static_cast<int>(words.size()), argv.data(), host);
}

}  // namespace

void bind_cli(nb::module_& m) {
  m.def("_cli_main", &cli_main, nb::arg("argv"),
        "Runs the headsep command line (argv[0] the program name) in this process; returns its exit status.");
}

}  // namespace headsep::python
