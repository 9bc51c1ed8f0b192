// bind_core: the errors (headsep.Error, headsep.UsageError), the package's plugin folder and
// headsep.plugins(); the RunResult class, run() and model() are bound by result.cpp, run.cpp and
// model.cpp, called from here.
#include "core.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <charconv>
#include <system_error>

#include "bindings.hpp"
#include "headsep/error.hpp"
#include "job/job.hpp"
#include "result.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

std::filesystem::path& plugin_dir_storage() {
  static std::filesystem::path dir;
  return dir;
}

nb::object& error_storage() {
  static nb::object* e = new nb::object();  // leaked on purpose: alive until the interpreter ends
  return *e;
}

nb::object& usage_storage() {
  static nb::object* e = new nb::object();
  return *e;
}

// A declared default in its parameter's type (a required parameter: None).
nb::object typed_default(const PluginParamInfo& q) {
  if (!q.default_value) return nb::none();
  const std::string& v = *q.default_value;
  switch (q.type) {
    case ParamType::integer: {
      long long x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size()) return nb::int_(x);
      break;
    }
    case ParamType::real: {
      double x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size()) return nb::float_(x);
      break;
    }
    case ParamType::boolean:
      if (v == "true" || v == "false") return nb::bool_(v == "true");
      break;
    case ParamType::string: break;
  }
  return nb::str(v.c_str(), v.size());
}

nb::dict plugin_dict(const PluginInfo& p) {
  nb::dict d;
  d["name"] = p.name;
  d["kind"] = std::string(to_string(p.kind));
  d["version"] = p.version;
  d["description"] = p.description;
  d["file"] = p.file.string();
  d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
  nb::list params;
  for (const auto& q : p.params) {
    nb::dict e;
    e["name"] = q.name;
    e["type"] = std::string(to_string(q.type));
    e["default"] = typed_default(q);
    e["required"] = !q.default_value.has_value();
    e["help"] = q.help;
    params.append(e);
  }
  d["parameters"] = params;
  return d;
}

// headsep.plugins(): (plugins as dicts, in `headsep plugins` order: scenario then weighting;
// files that could not be loaded as "why" strings).
nb::tuple list_plugins(const std::vector<std::string>& dirs) {
  PluginRegistry reg;
  {
    nb::gil_scoped_release unlocked;
    reg = load_registry(dirs);
  }
  nb::list out, failures;
  for (int kind = 1; kind <= 2; ++kind)
    for (const auto& p : reg.plugins())
      if (static_cast<int>(p.kind) == kind) out.append(plugin_dict(p));
  for (const auto& f : reg.failures()) failures.append(nb::str(f.what.c_str()));
  return nb::make_tuple(out, failures);
}

}  // namespace

const std::filesystem::path& package_plugin_dir() { return plugin_dir_storage(); }

PluginRegistry load_registry(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) throw UsageError("plugin_dirs: " + d + ": no such directory");
  }
  return job::load_registry(dirs, package_plugin_dir());
}

nb::handle error_type() { return error_storage(); }
nb::handle usage_error_type() { return usage_storage(); }

void bind_core(nb::module_& m) {
  error_storage() = nb::steal(PyErr_NewExceptionWithDoc(
      "headsep.Error", "A run failed: bad input data (the message names file, line and column) or a plugin failure.",
      PyExc_RuntimeError, nullptr));
  m.attr("Error") = error_storage();
  nb::object bases = nb::make_tuple(error_storage(), nb::handle(PyExc_ValueError));
  usage_storage() = nb::steal(PyErr_NewExceptionWithDoc(
      "headsep.UsageError", "A bad argument (the CLI's usage errors): both a headsep.Error and a ValueError.",
      bases.ptr(), nullptr));
  m.attr("UsageError") = usage_storage();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Interrupted&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    } catch (const UsageError& e) {
      PyErr_SetString(usage_storage().ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error_storage().ptr(), e.what());
    }
  });
  m.attr("__version__") = HEADSEP_VERSION;
  m.def("_set_plugin_dir", [](const std::string& dir) { plugin_dir_storage() = dir; },
        "Sets the package's own plugin folder (headsep/__init__.py calls it once).");
  m.def("_plugins", &list_plugins, nb::arg("plugin_dirs"),
        "(plugins, failures): what `headsep plugins` lists, as dicts; files that failed to load.");
  bind_result(m);
  bind_run(m);
  bind_model(m);
}

}  // namespace headsep::python
