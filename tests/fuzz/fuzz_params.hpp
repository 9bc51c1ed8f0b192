// Fuzz harness: `-p [plugin.]key=value` (split_params, resolve_params in runtime/host/params.cpp).
// The input is the command line's -p items, one per line, against two fixed parameter tables
// that share some keys. What resolve_params returns must be every declared parameter once, in
// table order, in canonical form — resolving it again must give it back unchanged. (Defaults
// here are canonical already: load_entry canonicalizes a plugin's defaults when it loads it.)
#pragma once
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "headsep/plugin_host.hpp"

namespace headsep::fuzz::params {

inline const PluginInfo& scenario_info() {
  static const PluginInfo p = [] {
    PluginInfo i;
    i.kind = PluginKind::scenario;
    i.name = "gen";
    i.file = "/fuzz/gen.so";
    i.params = {{"path", ParamType::string, std::nullopt, "input file"},
                {"reports", ParamType::integer, "4", ""},
                {"seed", ParamType::integer, "-1", ""},
                {"ratio", ParamType::real, "0.5", ""},
                {"names", ParamType::boolean, "false", ""},
                {"features", ParamType::string, "", ""}};
    return i;
  }();
  return p;
}

inline const PluginInfo& weighting_info() {
  static const PluginInfo p = [] {
    PluginInfo i;
    i.kind = PluginKind::weighting;
    i.name = "axis-focus";
    i.file = "/fuzz/axis-focus.so";
    i.params = {{"heads", ParamType::integer, "2", ""},
                {"sharpness", ParamType::real, "0.001", ""},
                {"names", ParamType::boolean, "true", ""},
                {"axes", ParamType::string, "a=b", ""},
                {"Weights_path", ParamType::string, std::nullopt, ""}};
    return i;
  }();
  return p;
}

inline void check_resolved(const PluginInfo& info, const PluginParams& out) {
  expect(out.size() == info.params.size(), "resolve_params: not every declared parameter once");
  for (std::size_t i = 0; i < out.size(); ++i) {
    expect(out[i].first == info.params[i].name, "resolve_params: not in table order");
    const std::string& v = out[i].second;
    switch (info.params[i].type) {
      case ParamType::boolean: expect(v == "true" || v == "false", "resolve_params: bool '" + v + "' not canonical"); break;
      case ParamType::integer: expect(!v.empty() && v.find_first_not_of("-0123456789") == std::string::npos,
                                      "resolve_params: int '" + v + "' not canonical"); break;
      default: break;
    }
  }
  // Canonical values are fixed points: resolving the result again gives it back.
  expect(resolve_params(info, out) == out, "resolve_params: canonical values are not stable");
}

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> items;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (!in.empty() && items.size() < 64) {
    auto nl = in.find('\n');
    items.emplace_back(in.substr(0, nl));
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  const auto& s = scenario_info();
  const auto& w = weighting_info();
  accepted([&] {
    const auto split = split_params(items, s, w);
    const PluginParams &sp = split.first, &wp = split.second;  // not a structured binding: clang 14 cannot capture one
    expect(sp.size() + wp.size() >= items.size(), "split_params dropped an item");
    accepted([&] { check_resolved(s, resolve_params(s, sp)); });
    accepted([&] { check_resolved(w, resolve_params(w, wp)); });
  });
  // Every item straight to one plugin, as `headsep plugins`/open_*_plugin see given parameters.
  PluginParams direct;
  for (const auto& it : items) {
    auto eq = it.find('=');
    direct.emplace_back(it.substr(0, eq), eq == std::string::npos ? std::string() : it.substr(eq + 1));
  }
  accepted([&] { check_resolved(s, resolve_params(s, direct)); });
  accepted([&] { check_resolved(w, resolve_params(w, direct)); });
  return 0;
}

}  // namespace headsep::fuzz::params
