// axis-focus: the plugin's parameters as data — the context axes ("axes", --axes syntax) and the
// head designs ("designs", one axis@sharpness per head), parsed and checked against the schema.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headsep/plugin_sdk.hpp"

namespace axis_focus {

struct Head {
  std::uint32_t axis;
  double sharpness;
};
struct Design {
  std::string name;
  std::vector<Head> heads;
};

// Context axes in --axes syntax: "name=[k*]col(+|-)[k*]col;...", bound to feature indices.
struct Axis {
  std::string name;
  std::vector<std::pair<std::uint32_t, double>> terms;  // (feature, coefficient)
};

/// The axes of `spec`; throws PluginError on a malformed axis or an unknown column.
std::vector<Axis> parse_axes(const std::string& spec, const headsep::sdk::SchemaView& schema);

/// The designs of `spec` ("name=axis[@sharpness],...;..."), a head without @ taking
/// `default_sharpness`; throws PluginError on an unknown axis, a bad sharpness or designs of
/// different head counts.
std::vector<Design> parse_designs(const std::string& spec, const std::vector<Axis>& axes, double default_sharpness);

}  // namespace axis_focus
