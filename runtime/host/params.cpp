// Plugin parameters: the table a plugin declares, values checked and put in canonical form by type,
// and `-p [plugin.]key=value` split between the scenario and weighting plugins (split_params) and
// resolved against each one's table (resolve_params).
#include "host/params.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "host/text_checks.hpp"
#include "support/text_util.hpp"

namespace headsep {

namespace {

std::optional<std::string> canonical_value(ParamType t, const std::string& v) {
  switch (t) {
    case ParamType::string:
      return v;
    case ParamType::integer: {
      std::int64_t x = 0;
      const char* b = v.data() + (v.size() > 1 && v[0] == '+' ? 1 : 0);
      auto [p, ec] = std::from_chars(b, v.data() + v.size(), x);
      if (ec != std::errc() || p != v.data() + v.size() || b == v.data() + v.size()) return std::nullopt;
      return std::to_string(x);
    }
    case ParamType::real:  // the CSV's number grammar (text_util.hpp; docs/PLUGINS.md "Parameter values")
      return canonical_double(v);
    case ParamType::boolean: {
      std::string l;
      for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (l == "true" || l == "1" || l == "yes" || l == "on") return std::string("true");
      if (l == "false" || l == "0" || l == "no" || l == "off") return std::string("false");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string type_help(ParamType t) {
  switch (t) {
    case ParamType::string: return "a string";
    case ParamType::integer: return "an integer";
    case ParamType::real: return "a finite number";
    case ParamType::boolean: return "a boolean (true/false, 1/0, yes/no, on/off)";
  }
  return "?";
}

std::string param_list(const PluginInfo& p) {
  std::string s;
  for (const auto& q : p.params) s += (s.empty() ? "" : ", ") + q.name;
  return s.empty() ? "(none)" : s;
}

}  // namespace

namespace host {

std::vector<PluginParamInfo> declared_params(const std::string& who, const headsep_param_spec* params, std::uint32_t n) {
  std::vector<PluginParamInfo> out;
  std::set<std::string> seen;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& p = params[i];
    if (auto why = name_problem(p.name, true); !why.empty())
      throw PluginError(who + ": parameter " + std::to_string(i + 1) + " has an invalid name: the name " + why);
    if (p.type < HEADSEP_PARAM_STRING || p.type > HEADSEP_PARAM_BOOL)
      throw PluginError(who + ": parameter '" + p.name + "' has unknown type " + std::to_string(p.type));
    if (!seen.insert(p.name).second) throw PluginError(who + ": parameter '" + std::string(p.name) + "' declared twice");
    PluginParamInfo pi;
    pi.name = p.name;
    pi.type = static_cast<ParamType>(p.type);
    if (p.default_value) {
      // Defaults reach open()/create() as they are, so they must pass the check user values pass.
      auto c = text_problem(p.default_value, true).empty() ? canonical_value(pi.type, p.default_value) : std::nullopt;
      if (!c)
        throw PluginError(who + ": parameter '" + pi.name + "' (" + std::string(to_string(pi.type)) + ") has the default '" +
                          shown(p.default_value) + "', which is not " + type_help(pi.type));
      pi.default_value = std::move(*c);
    }
    if (p.help) {
      if (auto why = text_problem(p.help, true); !why.empty()) throw PluginError(who + ": help of parameter '" + pi.name + "' " + why);
      pi.help = p.help;
    }
    out.push_back(std::move(pi));
  }
  return out;
}

std::vector<headsep_param> c_params(const PluginParams& resolved) {
  std::vector<headsep_param> v;
  for (const auto& [k, val] : resolved) v.push_back({k.c_str(), val.c_str()});
  return v;
}

}  // namespace host

// ---- public API ---------------------------------------------------------------------------

std::string_view to_string(ParamType type) noexcept {
  switch (type) {
    case ParamType::string: return "string";
    case ParamType::integer: return "int";
    case ParamType::real: return "float";
    case ParamType::boolean: return "bool";
  }
  return "?";
}

PluginParams resolve_params(const PluginInfo& plugin, const PluginParams& given) {
  std::map<std::string, std::string> values;
  for (const auto& [k, v] : given) {
    auto it = std::find_if(plugin.params.begin(), plugin.params.end(), [&key = k](const auto& p) { return p.name == key; });
    if (it == plugin.params.end())
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' has no parameter '" + k +
                       "'; valid parameters: " + param_list(plugin));
    auto c = canonical_value(it->type, v);
    if (!c)
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "': parameter '" + k +
                       "' expects " + type_help(it->type) + ", got '" + v + "'");
    values[k] = *c;
  }
  PluginParams out;
  for (const auto& p : plugin.params) {
    auto it = values.find(p.name);
    if (it != values.end()) {
      out.emplace_back(p.name, it->second);
    } else if (p.default_value) {
      out.emplace_back(p.name, *p.default_value);
    } else {
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' needs parameter '" + p.name +
                       "' (-p " + p.name + "=VALUE, " + type_help(p.type) + ")" + (p.help.empty() ? "" : ": " + p.help));
    }
  }
  return out;
}

std::pair<PluginParams, PluginParams> split_params(const std::vector<std::string>& items, const PluginInfo& scenario,
                                                   const PluginInfo& weighting) {
  std::pair<PluginParams, PluginParams> out;
  auto declares = [](const PluginInfo& p, const std::string& k) {
    return std::any_of(p.params.begin(), p.params.end(), [&](const auto& q) { return q.name == k; });
  };
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("-p '" + item + "': expected key=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto dot = key.find('.');
    if (dot != std::string::npos) {
      std::string who = key.substr(0, dot), k = key.substr(dot + 1);
      bool any = false;
      if (who == scenario.name || who == "scenario") out.first.emplace_back(k, value), any = true;
      if (who == weighting.name || who == "weighting") out.second.emplace_back(k, value), any = true;
      if (!any)
        throw UsageError("-p '" + item + "': '" + who + "' is neither the scenario plugin ('" + scenario.name +
                         "') nor the weighting plugin ('" + weighting.name + "')");
      continue;
    }
    bool s = declares(scenario, key), w = declares(weighting, key);
    if (s) out.first.emplace_back(key, value);
    if (w) out.second.emplace_back(key, value);
    if (!s && !w)
      throw UsageError("-p '" + item + "': no parameter '" + key + "'; valid: scenario plugin '" + scenario.name +
                       "': " + param_list(scenario) + "; weighting plugin '" + weighting.name + "': " + param_list(weighting));
  }
  return out;
}

}  // namespace headsep
