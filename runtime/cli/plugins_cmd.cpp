// headsep plugins: the plugins found on the search path, or one plugin's parameters.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep::cli {

CLI::App* add_plugins(CLI::App& app, PluginsArgs& pa) {
  auto* pluginsc = app.add_subcommand("plugins", "List the plugins found, or show one plugin's parameters");
  pluginsc->add_option("name", pa.name, "Plugin to describe");
  add_plugin_dir_option(*pluginsc, pa.dirs);
  return pluginsc;
}

int plugins_cmd(const PluginsArgs& pa) {
  const std::vector<std::string>& dirs = pa.dirs;
  const std::string& name = pa.name;
  auto reg = load_registry(dirs);
  for (const auto& f : reg.failures()) std::fprintf(stderr, "headsep: warning: skipped %s\n", printable(f.what).c_str());
  if (!name.empty()) {
    const PluginInfo* p = reg.find(name);
    if (!p) {
      std::string msg = "no plugin named '" + name + "' (see 'headsep plugins')";
      throw PluginError(msg);
    }
    std::fprintf(data_stdout(), "%s (%s plugin) %s\n", p->name.c_str(), std::string(to_string(p->kind)).c_str(), printable(p->version, 200).c_str());
    std::fprintf(data_stdout(), "  %s\n", printable(p->description).c_str());
    std::fprintf(data_stdout(), "  file: %s\n  abi:  %u.%u\n", p->file.empty() ? p->origin.c_str() : p->file.string().c_str(),
                 p->abi_major, p->abi_minor);
    if (p->params.empty()) {
      std::fprintf(data_stdout(), "parameters: none\n");
      return 0;
    }
    std::fprintf(data_stdout(), "parameters (-p key=value):\n");
    for (const auto& q : p->params) {
      std::string def = q.default_value ? "default: " + (q.default_value->empty() ? std::string("\"\"") : *q.default_value)
                                        : std::string("required");
      std::fprintf(data_stdout(), "  %-18s %-6s %s\n", q.name.c_str(), std::string(to_string(q.type)).c_str(), printable(def).c_str());
      if (!q.help.empty()) std::fprintf(data_stdout(), "  %-18s        %s\n", "", printable(q.help).c_str());
    }
    return 0;
  }
  std::fprintf(data_stdout(), "%-10s %-14s %-8s %-4s %s\n", "KIND", "NAME", "VERSION", "ABI", "FILE");
  for (int kind = 1; kind <= 2; ++kind)
    for (const auto& p : reg.plugins()) {
      if (static_cast<int>(p.kind) != kind) continue;
      std::string abi = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
      std::fprintf(data_stdout(), "%-10s %-14s %-8s %-4s %s\n", std::string(to_string(p.kind)).c_str(), p.name.c_str(), printable(p.version, 200).c_str(),
                  abi.c_str(), p.file.empty() ? p.origin.c_str() : p.file.string().c_str());
      std::fprintf(data_stdout(), "%-10s %s\n", "", printable(p.description).c_str());
    }
  if (reg.plugins().empty()) {
    std::string where;
    for (const auto& d : reg.dirs()) where += " " + d.string();
    std::fprintf(data_stdout(), "(no plugins found; searched:%s)\n", where.empty() ? " nothing" : where.c_str());
  }
  return 0;
}

}  // namespace headsep::cli
