// Private: checks of the names and text a plugin declares (plugin and parameter names, feature and
// scenario names, versions, help), and how such text is shown in messages (text_checks.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headsep::host {

/// A string a plugin gave, fit for a message: control bytes and invalid UTF-8 as \xNN, cut at 80 bytes.
std::string shown(std::string_view s);

/// Plugin names: [a-z0-9_-]+; parameter names (upper_ok): [A-Za-z0-9_-]+; both at most
/// max_name_bytes and never containing '.', which `-p NAME.key=value` uses as the separator.
/// Returns the problem ("is empty", ...), empty when valid.
std::string name_problem(const char* s, bool upper_ok);

/// Feature and scenario names (and other text a plugin declares): non-NULL, valid UTF-8, at most
/// max_label_bytes, non-empty unless empty_ok. Returns the problem, empty when valid.
std::string text_problem(const char* s, bool empty_ok = false);

/// Checks a name table a plugin returned: the array, each entry, duplicates and the count limit.
/// `what` names one entry ("feature", "scenario"); `field` the array. Returns the names or throws
/// PluginError(prefix + problem).
std::vector<std::string> checked_names(const std::string& prefix, const char* field, const char* count_field,
                                       const char* what, std::uint32_t n, const char* const* names,
                                       std::uint32_t limit);

}  // namespace headsep::host
