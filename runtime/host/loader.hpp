// Private: a loaded plugin (its library, its descriptor, its PluginInfo) and the loader that opens
// one and checks it (loader.cpp). Everything that calls into a plugin holds an Entry.
#pragma once
#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"

namespace headsep {

struct PluginRegistry::Entry {
  std::shared_ptr<boost::dll::shared_library> lib;  // plugins from files
  std::shared_ptr<const void> owner;                // in-process plugins (InProcessPlugin::owner)
  void* user = nullptr;                             // in-process plugins: *state before open/create
  headsep_plugin_descriptor d{};  // the plugin's descriptor, fields beyond its struct_size zeroed
  PluginInfo info;
  std::string in_flight;  // info.label(), kept for the crash handler (support/in_flight.hpp)
};

namespace host {

using Entry = PluginRegistry::Entry;

/// Opens one plugin file and checks it: loadable, entry symbol, ABI major first, then every
/// descriptor field and the parameter table. Throws PluginError naming the file.
std::shared_ptr<Entry> load_entry(const std::filesystem::path& file);

/// The checks load_entry makes once the descriptor is in hand (ABI major first, then the fields),
/// for a descriptor from a file or from the process (in_process.cpp). `where` names it in
/// messages (the file, or InProcessPlugin::origin). Fills `d` and `info`, not `lib`/`owner`.
std::shared_ptr<Entry> entry_from_descriptor(const headsep_plugin_descriptor* raw, const std::string& where);

/// The plugin's last_error() text, or "(the plugin gave no message)" when it gives none or throws.
std::string last_error_of(const Entry& e);

}  // namespace host
}  // namespace headsep
