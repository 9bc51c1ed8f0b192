// In-process plugins: a descriptor that lives in this process (a Python class, a test's C++ plugin)
// registered under a name, checked like a file's and then opened by the same wrappers.
#include <utility>

#include "headsep/plugin_host.hpp"
#include "host/loader.hpp"

namespace headsep {

const PluginInfo& PluginRegistry::add(InProcessPlugin plugin) {
  if (plugin.origin.empty()) throw PluginError("an in-process plugin needs an origin to name it in messages");
  auto e = host::entry_from_descriptor(&plugin.descriptor, plugin.origin);
  e->owner = std::move(plugin.owner);
  e->user = plugin.user;
  e->info.origin = std::move(plugin.origin);
  e->in_flight = e->info.label();  // the crash handler names it by its origin
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (infos_[i].name != e->info.name) continue;
    if (infos_[i].origin.empty())
      throw PluginError("two plugins are named '" + e->info.name + "': " + infos_[i].file.string() + " and " +
                        e->info.origin + " (rename one)");
    infos_[i] = e->info;  // a newer definition of the same in-process plugin
    entries_[i] = std::move(e);
    return infos_[i];
  }
  infos_.push_back(e->info);
  entries_.push_back(std::move(e));
  return infos_.back();
}

}  // namespace headsep
