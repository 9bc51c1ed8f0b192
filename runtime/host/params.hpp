// Private: plugin parameters as the loader and the C++ wrappers need them (params.cpp; the public
// resolve_params and split_params, `-p` on the command line, are declared in plugin_host.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"

namespace headsep::host {

/// Checks the parameter table a descriptor declares (names, types, no duplicates, defaults that
/// pass the check user values pass) and returns it with defaults in canonical form. `who` names
/// the plugin in messages ("FILE: plugin 'NAME'"). Throws PluginError.
std::vector<PluginParamInfo> declared_params(const std::string& who, const headsep_param_spec* params, std::uint32_t n);

/// Resolved parameters as open()/create() take them; pointers into `resolved`.
std::vector<headsep_param> c_params(const PluginParams& resolved);

}  // namespace headsep::host
