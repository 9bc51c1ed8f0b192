// Finding plugins: the folders searched (--plugin-dir, HEADSEP_PLUGIN_PATH, the builtin folder),
// every shared library in them loaded into a PluginRegistry, and lookup by name and kind.
#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <set>
#include <system_error>

#include "headsep/plugin_host.hpp"
#include "host/loader.hpp"

namespace headsep {

namespace fs = std::filesystem;
using host::load_entry;

PluginRegistry::PluginRegistry() = default;
PluginRegistry::~PluginRegistry() = default;
PluginRegistry::PluginRegistry(PluginRegistry&&) noexcept = default;
PluginRegistry& PluginRegistry::operator=(PluginRegistry&&) noexcept = default;

PluginRegistry PluginRegistry::discover(const std::vector<fs::path>& dirs) {
  PluginRegistry reg;
  reg.dirs_ = dirs;
  std::set<fs::path> seen_files;
  const std::string suffix = boost::dll::shared_library::suffix().string();
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& de : fs::directory_iterator(dir, ec)) {
      const auto name = de.path().filename().string();
      if (name.empty() || name[0] == '.' || name.size() <= suffix.size()) continue;
      if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      if (!de.is_regular_file(ec)) continue;
      files.push_back(de.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto canon = fs::weakly_canonical(f, ec);
      if (!seen_files.insert(ec ? f : canon).second) continue;  // same file reached twice
      try {
        auto e = load_entry(f);
        if (auto* other = reg.find(e->info.name))
          throw PluginError("two plugins are named '" + e->info.name + "': " + other->file.string() + " and " +
                            f.string() + " (remove or rename one)");
        reg.infos_.push_back(e->info);
        reg.entries_.push_back(std::move(e));
      } catch (const PluginError& err) {
        if (std::string_view(err.what()).starts_with("two plugins")) throw;
        reg.failures_.push_back({f, err.what()});
      }
    }
  }
  return reg;
}

const PluginInfo* PluginRegistry::find(std::string_view name) const noexcept {
  for (const auto& i : infos_)
    if (i.name == name) return &i;
  return nullptr;
}

std::shared_ptr<const PluginRegistry::Entry> PluginRegistry::entry(std::string_view name) const {
  for (const auto& e : entries_)
    if (e->info.name == name) return e;
  return nullptr;
}

const PluginInfo& PluginRegistry::require(std::string_view name, PluginKind kind) const {
  const PluginInfo* p = find(name);
  if (p && p->kind == kind) return *p;
  std::string msg;
  if (p) {
    msg = std::string("'") + std::string(name) + "' is a " + std::string(to_string(p->kind)) + " plugin (" +
          p->file.string() + "), not a " + std::string(to_string(kind)) + " plugin";
  } else {
    msg = "no " + std::string(to_string(kind)) + " plugin named '" + std::string(name) + "'";
    std::string avail;
    for (const auto& i : infos_)
      if (i.kind == kind) avail += (avail.empty() ? "" : ", ") + i.name;
    msg += " (available: " + (avail.empty() ? std::string("none") : avail) + "; searched:";
    if (dirs_.empty()) msg += " no folders";
    for (const auto& d : dirs_) msg += " " + d.string();
    msg += ")";
  }
  for (const auto& f : failures_) msg += "\n  could not load " + f.what;
  throw PluginError(msg);
}

std::vector<fs::path> plugin_search_path(const std::vector<std::string>& cli_dirs) {
  return plugin_search_path(cli_dirs, builtin_plugin_dir());
}

std::vector<fs::path> plugin_search_path(const std::vector<std::string>& cli_dirs, const fs::path& builtin) {
  std::vector<fs::path> out;
  for (const auto& d : cli_dirs) out.emplace_back(d);
  if (const char* env = std::getenv("HEADSEP_PLUGIN_PATH")) {
    std::string_view s(env);
    while (!s.empty()) {
      auto p = s.find(':');
      auto item = s.substr(0, p);
      if (!item.empty()) out.emplace_back(std::string(item));
      if (p == std::string_view::npos) break;
      s.remove_prefix(p + 1);
    }
  }
  if (!builtin.empty()) out.push_back(builtin);
  return out;
}

fs::path builtin_plugin_dir() {
  std::error_code ec;
  fs::path exe;
  try {
    exe = boost::dll::program_location();
  } catch (...) {
    return {};
  }
  exe = fs::weakly_canonical(exe, ec);
#if defined(HEADSEP_BUILD_BINARY_DIR) && defined(HEADSEP_BUILD_PLUGIN_DIR)
  {
    const fs::path bin = fs::weakly_canonical(HEADSEP_BUILD_BINARY_DIR, ec);
    auto rel = exe.lexically_relative(bin);
    if (!ec && !rel.empty() && *rel.begin() != "..") {
      fs::path p(HEADSEP_BUILD_PLUGIN_DIR);
      if (fs::is_directory(p, ec)) return p;
    }
  }
#endif
#ifdef HEADSEP_PLUGIN_DIR_FROM_BIN
  fs::path p = (exe.parent_path() / HEADSEP_PLUGIN_DIR_FROM_BIN).lexically_normal();
  if (fs::is_directory(p, ec)) return p;
#endif
  return {};
}

}  // namespace headsep
