// Fuzz harness: the plugin host's checks (runtime/host/: loader.cpp load_entry's descriptor and
// parameter-table checks, describe()'s schema, every chunk of next_chunk / fill, describe_weighting's
// info; runtime/host/attention_spec.cpp: attention specs), through a real plugin whose declarations
// come from the fuzz bytes (tests/fuzz/plugin/fuzzplug.cpp explains how, and why it never lies
// about its own memory). Byte 0 configures the host side (max_reports, the schema a weighting
// is created for, fill vs next); the rest is the plugin's script.
//
// Accepted outcomes: success, or a headsep::Error — and a PluginError must name the plugin file.
// Findings besides crashes: a batch that breaks a ReportSource's promises (check_batch), a host
// promise the plugin saw broken (parameters, batch views), a load failure not naming the file.
#pragma once
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "headsep/plugin_host.hpp"

#ifndef HEADSEP_FUZZ_PLUGIN_DIR
#error "HEADSEP_FUZZ_PLUGIN_DIR: the folder holding fuzzplug.so (tests/fuzz/CMakeLists.txt sets it)"
#endif

namespace headsep::fuzz::plugin {

struct Api {
  std::string dir, file, st_dir;
  void (*set_input)(const std::uint8_t*, std::size_t, const char*) = nullptr;
  const char* (*violation)() = nullptr;
};

/// fuzzplug.so, loaded once and never unloaded, so every load the host makes shares it.
/// HEADSEP_FUZZ_PLUGIN_DIR in the environment overrides the build folder.
inline const Api& api() {
  static const Api a = [] {
    Api x;
    const char* env = std::getenv("HEADSEP_FUZZ_PLUGIN_DIR");
    x.dir = env && *env ? env : HEADSEP_FUZZ_PLUGIN_DIR;
    x.file = x.dir + "/fuzzplug.so";
    x.st_dir = std::string(HEADSEP_SOURCE_DIR) + "/tests/data";
    void* h = ::dlopen(x.file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error("cannot load " + x.file + ": " + ::dlerror());
    x.set_input = reinterpret_cast<decltype(x.set_input)>(::dlsym(h, "headsep_fuzz_plugin_set_input"));
    x.violation = reinterpret_cast<decltype(x.violation)>(::dlsym(h, "headsep_fuzz_plugin_violation"));
    if (!x.set_input || !x.violation) throw std::runtime_error(x.file + " lacks the fuzz entry points");
    return x;
  }();
  return a;
}

/// The schema a weighting scheme is created for (what a scenario generator would have declared).
inline Schema host_schema(unsigned variant) {
  Schema s;
  switch (variant % 4) {
    case 0: s.feature_names = {"a", "b", "c"}; break;
    case 1:
      s.feature_names = {"a", "b", "c"};
      s.scenario_names = {"s1", "s2"};
      s.names_scenarios = true;
      s.given_heads = 2;
      break;
    case 2: s.d_model = 8; break;
    default:
      s.feature_names = {"a", "b"};
      s.d_model = 8;
      break;
  }
  return s;
}

/// A small batch of that schema: 3 reports of 1, 2 and 3 tokens.
inline ReportBatch host_batch(const Schema& s) {
  ReportBatch b;
  b.token_offset = {0, 1, 3, 6};
  b.features.assign(s.feature_names.size(), std::vector<double>{0.5, 1.0, -0.25, 2.0, 0.0, 1.5});
  if (s.names_scenarios) {
    b.scenarios = {0, 1};
    b.given_weights.assign(2 * (std::size_t(s.given_heads) + 1), std::vector<double>(6, 0.5));
  }
  if (s.d_model) b.embeddings.assign(6 * std::size_t(s.d_model), 0.25f);
  return b;
}

inline void use_scenario(const PluginRegistry& reg, const PluginInfo& info, std::size_t max_reports, bool prefer_next) {
  PluginParams given;  // a value for every required parameter ("1" is valid for every type)
  for (const auto& p : info.params)
    if (!p.default_value) given.emplace_back(p.name, "1");
  auto src = open_scenario_plugin(reg, info.name, given);
  const Schema& schema = src->schema();
  expect(schema.feature_names.size() <= plugin_limits::max_features, "schema over the feature limit accepted");
  expect(schema.given_heads <= plugin_limits::max_heads, "schema over the given_heads limit accepted");
  ReportBatch b;
  if (src->random_access() && !prefer_next) {
    for (std::uint64_t i = 0; i < 6; ++i) {
      if (!src->fill(i, max_reports, b)) break;
      check_batch(schema, b, "plugin source (fill)");
      expect(b.n_reports() >= 1 && b.n_reports() <= max_reports, "fill(): batch size outside 1..max_reports");
    }
  } else {
    for (int i = 0; i < 6; ++i) {
      if (!src->next(b, max_reports)) break;
      check_batch(schema, b, "plugin source (next)");
      expect(b.n_reports() >= 1 && b.n_reports() <= max_reports, "next(): batch size outside 1..max_reports");
    }
  }
}

inline void use_weighting(const PluginRegistry& reg, const PluginInfo& info, unsigned schema_variant) {
  PluginParams given;
  for (const auto& p : info.params)
    if (!p.default_value) given.emplace_back(p.name, "1");
  const Schema schema = host_schema(schema_variant);
  auto w = open_weighting_plugin(reg, info.name, given, schema);
  expect(w->heads() >= 1 && w->heads() <= plugin_limits::max_heads, "a weighting's heads outside 1..max_heads accepted");
  if (const AttentionPlan* plan = w->attention(0)) {  // the engine's attention stage runs plans, not the host
    if (verbose())
      std::fprintf(stderr, "fuzz: attention plan d_model %u, heads %u, width %zu\n", plan->d_model(), plan->heads(), plan->width());
    return;
  }
  const ReportBatch b = host_batch(schema);
  const auto own = w->own_scenarios();
  const std::size_t slots = !own.empty() ? own.size() : std::max<std::size_t>(1, b.scenarios.size());
  for (std::uint32_t slot = 0; slot < slots && slot < 4; ++slot) {
    WeightBlock out;
    if (w->per_query()) {
      out.layout = WeightBlock::Layout::per_query;
      out.query_offset = {0, 1, 5, 14};
    }
    w->weights(b, slot, out);
    expect(out.rows.size() == std::size_t(w->heads()) + 1, "weights(): not heads + 1 rows");
  }
}

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  const Api& a = api();
  ByteReader r(data, size);
  const std::uint8_t config = r.u8();
  const std::string_view script = r.rest();
  a.set_input(reinterpret_cast<const std::uint8_t*>(script.data()), script.size(), a.st_dir.c_str());
  const std::size_t max_reports = 1 + (config & 3);
  const unsigned schema_variant = (config >> 2) & 3;
  const bool prefer_next = config & 16;
  accepted([&] {
    try {
      const PluginRegistry reg = PluginRegistry::discover({a.dir});
      for (const auto& f : reg.failures())
        expect(f.what.find("fuzzplug.so") != std::string::npos, "a load failure that does not name the file: " + f.what);
      if (reg.plugins().empty()) return;
      const PluginInfo& info = reg.plugins()[0];
      expect(info.params.size() <= plugin_limits::max_params, "a parameter table over the limit accepted");
      if (info.kind == PluginKind::scenario) use_scenario(reg, info, max_reports, prefer_next);
      else use_weighting(reg, info, schema_variant);
    } catch (const PluginError& e) {
      expect(std::string(e.what()).find("fuzzplug.so") != std::string::npos,
             std::string("a PluginError that does not name the plugin file: ") + e.what());
      throw;
    }
  });
  if (const char* v = a.violation()) throw Finding(std::string("the host broke a promise to the plugin: ") + v);
  return 0;
}

}  // namespace headsep::fuzz::plugin
