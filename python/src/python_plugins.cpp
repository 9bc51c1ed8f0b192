// Registering a Python plugin: the instance's class attributes (name, version, description,
// parameters) become a C descriptor owned by a PyPlugin, which PluginRegistry::add checks like a
// .so's; bind_plugins exposes the registration to the package's tests (_register_plugin).
#include "python_plugins.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "bindings.hpp"
#include "core.hpp"
#include "headsep/axes.hpp"
#include "headsep/run.hpp"
#include "headsep/summary.hpp"
#include "python_plugin_calls.hpp"

namespace nb = nanobind;

namespace headsep::python {

namespace {

std::string str_of(nb::handle h) { return nb::cast<std::string>(nb::str(h)); }

// "MyGen" -> "my-gen", "HTTPReports" -> "http-reports": the default plugin name.
std::string kebab(const std::string& cls) {
  std::string out;
  for (std::size_t i = 0; i < cls.size(); ++i) {
    const char c = cls[i];
    const bool upper = c >= 'A' && c <= 'Z';
    const bool next_lower = i + 1 < cls.size() && cls[i + 1] >= 'a' && cls[i + 1] <= 'z';
    const bool prev_lower = i > 0 && ((cls[i - 1] >= 'a' && cls[i - 1] <= 'z') || (cls[i - 1] >= '0' && cls[i - 1] <= '9'));
    if (upper && i > 0 && (prev_lower || next_lower) && out.back() != '-') out += '-';
    out += upper ? char(c - 'A' + 'a') : c == '_' ? '-' : c;
  }
  return out;
}

// One declared parameter: a default value (its type gives the parameter's) or a headsep.Param.
void declare_param(PyPlugin& p, const std::string& key, nb::handle value, nb::handle param_cls) {
  nb::object def = nb::borrow(value), type = nb::none();
  std::string help;
  if (nb::isinstance(value, param_cls)) {
    def = value.attr("default");
    type = value.attr("type");
    help = str_of(value.attr("help"));
  }
  if (type.is_none() && !def.is_none()) type = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(def.ptr())));
  ParamType t;
  if (type.is(nb::handle(reinterpret_cast<PyObject*>(&PyBool_Type)))) t = ParamType::boolean;
  else if (type.is(nb::handle(reinterpret_cast<PyObject*>(&PyLong_Type)))) t = ParamType::integer;
  else if (type.is(nb::handle(reinterpret_cast<PyObject*>(&PyFloat_Type)))) t = ParamType::real;
  else if (type.is(nb::handle(reinterpret_cast<PyObject*>(&PyUnicode_Type)))) t = ParamType::string;
  else
    throw nb::type_error((p.origin + ": parameter '" + key + "': type " +
                          (type.is_none() ? std::string("unknown (a required parameter needs Param(type=...))")
                                          : str_of(type.attr("__name__"))) +
                          " is not one of int, float, bool, str")
                             .c_str());
  std::string text;
  if (!def.is_none()) {
    if (t == ParamType::boolean) text = nb::cast<bool>(def) ? "true" : "false";
    else if (t == ParamType::real) text = str_of(nb::repr(nb::float_(def)));  // shortest round trip
    else text = str_of(def);
  }
  p.param_names.push_back(key);
  p.param_types.push_back(t);
  p.param_defaults.push_back(text);
  p.param_helps.push_back(help);
  p.specs.push_back({nullptr, static_cast<std::uint32_t>(t), def.is_none() ? nullptr : reinterpret_cast<const char*>(1),
                     nullptr});
}

}  // namespace

PyPlugin::~PyPlugin() {
  if (!nb::is_alive() || !Py_IsInitialized()) {
    obj.release();  // the interpreter is gone: nothing to give back
    helpers.release();
    return;
  }
  nb::gil_scoped_acquire gil;
  obj.reset();
  helpers.reset();
}

std::string register_python_plugin(PluginRegistry& registry, nb::handle obj, std::shared_ptr<std::atomic<bool>> interrupted) {
  nb::module_ helpers = nb::module_::import_("headsep.python_plugins");
  auto p = std::make_shared<PyPlugin>();
  if (nb::isinstance(obj, helpers.attr("ScenarioGenerator"))) p->kind = PluginKind::scenario;
  else if (nb::isinstance(obj, helpers.attr("WeightingScheme"))) p->kind = PluginKind::weighting;
  else
    throw nb::type_error(("expected a plugin name or an instance of a headsep.ScenarioGenerator or "
                          "headsep.WeightingScheme subclass, got " +
                          str_of(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__qualname__")))
                             .c_str());
  nb::handle cls = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())));
  const std::string qual = str_of(cls.attr("__qualname__"));
  p->origin = "Python class " + str_of(cls.attr("__module__")) + "." + qual;
  p->obj = nb::borrow(obj);
  p->interrupted = std::move(interrupted);
  p->helpers = helpers;
  nb::object name = obj.attr("name");
  p->name = name.is_none() ? kebab(str_of(cls.attr("__name__"))) : str_of(name);
  p->version = str_of(obj.attr("version"));
  nb::object desc = obj.attr("description");
  if (desc.is_none()) desc = helpers.attr("_first_doc_line")(obj);
  p->description = str_of(desc);
  nb::object params = obj.attr("parameters");
  if (!nb::isinstance<nb::dict>(params))
    throw nb::type_error((p->origin + ": `parameters` must be a dict {name: default or headsep.Param}").c_str());
  for (auto [k, v] : nb::cast<nb::dict>(params)) declare_param(*p, str_of(k), v, helpers.attr("Param"));
  for (std::size_t i = 0; i < p->specs.size(); ++i) {  // pointers once the vectors are complete
    p->specs[i].name = p->param_names[i].c_str();
    p->specs[i].default_value = p->specs[i].default_value ? p->param_defaults[i].c_str() : nullptr;
    p->specs[i].help = p->param_helps[i].c_str();
  }
  InProcessPlugin in;
  in.descriptor = python_descriptor(*p);
  in.user = p.get();
  in.origin = p->origin;
  in.owner = p;
  return registry.add(std::move(in)).name;
}

namespace {

// The plugin's name: a registered Python object's, or the string itself.
std::string plugin_name(PluginRegistry& reg, nb::handle h) {
  return nb::isinstance<nb::str>(h) ? nb::cast<std::string>(h) : register_python_plugin(reg, h);
}

// The --summary JSON of a run (the seed's axes), for the plugin tests and bench/: the engine
// between a scenario and a weighting, each a name or a Python plugin; the GIL released meanwhile.
std::string summary_json(nb::handle scenario, nb::handle weighting, const std::vector<std::string>& params,
                         unsigned threads, std::size_t chunk) {
  PluginRegistry reg = load_registry({});
  const std::string s = plugin_name(reg, scenario), w = plugin_name(reg, weighting);
  nb::gil_scoped_release unlocked;
  auto [sp, wp] = split_params(params, reg.require(s, PluginKind::scenario), reg.require(w, PluginKind::weighting));
  auto source = open_scenario_plugin(reg, s, sp);
  auto weights = open_weighting_plugin(reg, w, wp, source->schema());
  auto axes = AxisMap::bind(parse_axes(kSeedAxes), source->schema().feature_names);
  Summary summary(RunInfo{axes.names(), weights->heads()});
  RunOptions opt;
  opt.threads = threads;
  if (chunk) opt.chunk_reports = chunk;
  run(*source, *weights, axes, opt, {&summary});
  return summary.json();
}

}  // namespace

void bind_plugins(nb::module_& m) {
  m.def(
      "_register_plugin",
      [](nb::handle obj) {
        PluginRegistry reg;
        return register_python_plugin(reg, obj);
      },
      nb::arg("plugin"), "Registers a Python plugin in a throwaway registry (the host's checks only); returns its name.");
  m.def("_summary_json", &summary_json, nb::arg("scenario"), nb::arg("weighting"), nb::arg("params"),
        nb::arg("threads") = 1, nb::arg("chunk") = 0,
        "The --summary JSON of a run with the seed's axes; scenario/weighting: names or Python plugins (tests, bench/).");
}

}  // namespace headsep::python
