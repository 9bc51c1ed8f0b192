// headsep — finding, loading and using plugins (the host side of plugin.h).
//
//   auto registry = PluginRegistry::discover(plugin_search_path({"./my-plugins"}));
//   auto source = open_scenario_plugin(registry, "ops-reports", {{"reports", "1000"}});
//   auto weighting = open_weighting_plugin(registry, "axis-focus", {}, source->schema());
//   run(*source, *weighting, axes, options, sink);
//
// Loading happens here, before any worker thread starts. Every object returned keeps its
// library loaded (shared ownership) until it is destroyed, whatever happens to the registry.
// A plugin may also live in the process itself (PluginRegistry::add, e.g. a Python class): it goes
// through the same checks and code paths as a file's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/source.hpp"

namespace headsep {

/// A plugin failed to load or misbehaved; the message names the plugin file (exit status 1).
class PluginError : public Error {
 public:
  using Error::Error;
};

/// What a plugin may declare (docs/PLUGINS.md, "Limits"). A plugin beyond a limit is refused,
/// naming the plugin file and the field; the host's arithmetic on these counts is 64-bit.
namespace plugin_limits {
inline constexpr std::uint32_t max_heads = 1024;       ///< a weighting's heads; a schema's given_heads
inline constexpr std::uint32_t max_features = 4096;    ///< a schema's feature columns
inline constexpr std::uint32_t max_scenarios = 4096;   ///< a schema's, a weighting's, one chunk's scenario list
inline constexpr std::uint32_t max_params = 256;       ///< entries of a parameter table
inline constexpr std::size_t max_name_bytes = 64;      ///< plugin and parameter names
inline constexpr std::size_t max_label_bytes = 4096;   ///< feature and scenario names, other declared text
inline constexpr std::uint64_t max_chunk_tokens = std::uint64_t(1) << 31;  ///< tokens in one chunk
}  // namespace plugin_limits

enum class PluginKind : std::uint8_t { scenario = 1, weighting = 2 };
std::string_view to_string(PluginKind kind) noexcept;

enum class ParamType : std::uint8_t { string = 1, integer = 2, real = 3, boolean = 4 };
std::string_view to_string(ParamType type) noexcept;

struct PluginParamInfo {
  std::string name;
  ParamType type = ParamType::string;
  std::optional<std::string> default_value;  ///< nullopt = required
  std::string help;
};

struct PluginInfo {
  PluginKind kind = PluginKind::scenario;
  std::string name, version, description;
  std::uint32_t abi_major = 0, abi_minor = 0;
  std::filesystem::path file;
  std::vector<PluginParamInfo> params;
  /// In-process plugins (PluginRegistry::add): what messages name in place of a file, e.g.
  /// "Python class mymod.MyGen"; `file` is then empty. Empty for plugins loaded from a file.
  std::string origin;
  /// "scenario plugin 'csv' (/path/csv.so)", or "... 'x' (Python class m.X)": how messages name it.
  std::string label() const;
};

/// A file in a plugin folder that could not be used, and why.
struct PluginLoadFailure {
  std::filesystem::path file;
  std::string what;  ///< full message, starts with the file name
};

/// A plugin that lives in this process instead of a shared library (PluginRegistry::add).
struct InProcessPlugin {
  /// Copied, then checked like a file's (ABI major, required fields, names, parameter table). Its
  /// strings, tables and functions must stay valid as long as `owner` lives.
  headsep_plugin_descriptor descriptor{};
  /// Keeps what the descriptor and `user` point to alive; the registry and every object opened
  /// from the plugin hold it (shared ownership), like a file's library.
  std::shared_ptr<const void> owner;
  /// The plugin's context: the host stores it in *state before it calls open()/create() (for
  /// plugins from files *state is NULL there), since those functions take no user-data argument.
  void* user = nullptr;
  /// Names the plugin in messages in place of a file: "Python class mymod.MyGen". Required.
  std::string origin;
};

/// User-given parameters, in command-line order: (key, value).
using PluginParams = std::vector<std::pair<std::string, std::string>>;

/// Every plugin found in a list of folders.
class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(PluginRegistry&&) noexcept;
  PluginRegistry& operator=(PluginRegistry&&) noexcept;

  /// Loads every shared library (*.so) directly in each folder, in order (folders that do not
  /// exist are skipped). A file that fails any check (not a shared library, no entry symbol,
  /// other ABI major, missing required field) goes to failures(). Throws PluginError when two
  /// plugins share a name, naming both files.
  static PluginRegistry discover(const std::vector<std::filesystem::path>& dirs);

  const std::vector<PluginInfo>& plugins() const noexcept { return infos_; }
  const std::vector<PluginLoadFailure>& failures() const noexcept { return failures_; }
  const std::vector<std::filesystem::path>& dirs() const noexcept { return dirs_; }
  const PluginInfo* find(std::string_view name) const noexcept;
  /// The plugin of that name and kind, or PluginError (names the folders searched and the files
  /// that failed to load, since the wanted plugin may be among them).
  const PluginInfo& require(std::string_view name, PluginKind kind) const;

  /// Registers an in-process plugin under its descriptor's name, after the checks a file's
  /// descriptor gets at load time (messages name `origin` where they name a file). It replaces an
  /// earlier in-process plugin of that name (objects opened from that one keep it alive); a
  /// name a plugin file holds is a PluginError naming both. Not thread-safe (like loading).
  const PluginInfo& add(InProcessPlugin plugin);

  struct Entry;
  std::shared_ptr<const Entry> entry(std::string_view name) const;

 private:
  std::vector<std::filesystem::path> dirs_;
  std::vector<PluginInfo> infos_;
  std::vector<std::shared_ptr<const Entry>> entries_;
  std::vector<PluginLoadFailure> failures_;
};

/// Loads one plugin file and returns its description; throws PluginError naming the file.
PluginInfo inspect_plugin(const std::filesystem::path& file);

/// The folders searched, in order: `cli_dirs` (--plugin-dir), then HEADSEP_PLUGIN_PATH
/// (colon-separated; empty entries ignored), then builtin_plugin_dir(). Never "." implicitly.
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::string>& cli_dirs);
/// The same with `builtin` in place of builtin_plugin_dir() (empty: none): the Python package's
/// own plugin folder, since its process's executable is the Python interpreter.
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::string>& cli_dirs,
                                                      const std::filesystem::path& builtin);

/// The runtime's own plugins: the build tree's plugin folder when the running executable lives
/// in the build tree, else <exe dir>/../lib/headsep/plugins (the install layout). Empty if none.
std::filesystem::path builtin_plugin_dir();

/// Checks `given` against the plugin's parameter table and returns every declared parameter
/// (given or default) in table order, values in canonical form. Throws UsageError: an unknown
/// key lists the valid ones; a bad value names the key and the expected type; a missing
/// required parameter names it.
PluginParams resolve_params(const PluginInfo& plugin, const PluginParams& given);

/// Splits command-line "-p [plugin.]key=value" items between the scenario generator and the
/// weighting scheme: a qualified key goes to the plugin named, an unqualified one to each of
/// them that declares it. Throws UsageError for a key neither declares (listing the valid ones).
std::pair<PluginParams, PluginParams> split_params(const std::vector<std::string>& items, const PluginInfo& scenario,
                                                   const PluginInfo& weighting);

/// Opens a scenario generator as a ReportSource.
std::unique_ptr<ReportSource> open_scenario_plugin(const PluginRegistry& registry, std::string_view name,
                                                   const PluginParams& params);

/// Creates a weighting scheme for data of `schema` (which must outlive the result: it names
/// scenarios in error messages). Scenarios it evaluates (own_scenarios()): the scheme's own if it
/// defines any; else the data's when the data names scenarios; else one named after the scheme.
/// weights() is thread-safe and checks that every weight is finite and >= 0.
std::unique_ptr<Weighting> open_weighting_plugin(const PluginRegistry& registry, std::string_view name,
                                                 const PluginParams& params, const Schema& schema);

}  // namespace headsep
