// Loading one plugin file (Boost.DLL): open the library, call its entry point, refuse a foreign ABI
// major before reading anything else, then check every descriptor field the plugin's kind needs.
// See include/headsep/plugin.h and docs/PLUGINS.md for the contract checked here.
#include "host/loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "host/params.hpp"
#include "host/text_checks.hpp"
#include "support/in_flight.hpp"
#include "support/text_util.hpp"

namespace headsep {

namespace fs = std::filesystem;

namespace host {
namespace {

namespace lim = plugin_limits;

using Library = boost::dll::shared_library;

std::shared_ptr<Library> open_library(const fs::path& file, const std::string& f) {
  auto lib = std::make_shared<Library>();
  try {
    lib->load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    // Boost's text is "boost::dll::shared_library::load() failed (dlerror system message: WHY):
    // ERRNO TEXT", where the errno text is stale noise: keep WHY, without the file name it repeats.
    std::string why = e.what();
    const std::string tag = "dlerror system message: ";
    if (auto pos = why.find(tag); pos != std::string::npos) {
      why.erase(0, pos + tag.size());
      if (auto end = why.rfind("): "); end != std::string::npos) why.erase(end);
      else if (!why.empty() && why.back() == ')') why.pop_back();
    }
    if (why.starts_with(f + ": ")) why.erase(0, f.size() + 2);
    throw PluginError(f + ": not a loadable shared library: " + why);
  }
  return lib;
}

// True when p lies in an executable segment of a loaded object: calling anything else (a data
// symbol named like the entry point, a descriptor field pointing at data) would crash every
// command that scans the plugin's folder.
bool is_code(const void* p) {
  struct Find {
    std::uintptr_t at;
    bool found = false;
  } find{reinterpret_cast<std::uintptr_t>(p)};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* q = static_cast<Find*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && q->at >= start && q->at < start + ph.p_memsz)
            return q->found = true, 1;
        }
        return 0;
      },
      &find);
  return find.found;
}

// The descriptor the entry point returns, not yet checked (never NULL).
const headsep_plugin_descriptor* call_entry(Library& lib, const std::string& f) {
  if (!lib.has(HEADSEP_PLUGIN_ENTRY_SYMBOL))
    throw PluginError(f + ": no entry symbol '" HEADSEP_PLUGIN_ENTRY_SYMBOL
                          "' (not a headsep plugin, or the symbol is not exported: use HEADSEP_PLUGIN_EXPORT or the SDK macros)");
  if (!is_code(::dlsym(lib.native(), HEADSEP_PLUGIN_ENTRY_SYMBOL)))
    throw PluginError(f + ": '" HEADSEP_PLUGIN_ENTRY_SYMBOL "' is not a function (a data symbol?): not a headsep plugin");
  const headsep_plugin_descriptor* raw = nullptr;
  try {
    support::InFlight in_flight(f.c_str(), HEADSEP_PLUGIN_ENTRY_SYMBOL "()");
    raw = lib.get<const headsep_plugin_descriptor*()>(HEADSEP_PLUGIN_ENTRY_SYMBOL)();
  } catch (...) {
    throw PluginError(f + ": " HEADSEP_PLUGIN_ENTRY_SYMBOL "() threw an exception");
  }
  if (!raw) throw PluginError(f + ": " HEADSEP_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  return raw;
}

// head = the descriptor's first three fields: abi_major, abi_minor, struct_size.
void check_abi(const std::uint32_t (&head)[3], const std::string& f) {
  const std::string ours = std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + "." + std::to_string(HEADSEP_PLUGIN_ABI_MINOR);
  if (head[0] != HEADSEP_PLUGIN_ABI_MAJOR)
    throw PluginError(f + ": built for plugin ABI " + std::to_string(head[0]) + "." + std::to_string(head[1]) +
                      ", but this headsep speaks ABI " + ours + " and loads only major version " +
                      std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + " (rebuild the plugin against this headsep's plugin.h)");
  if (head[2] < offsetof(headsep_plugin_descriptor, kind) + sizeof(std::uint32_t))
    throw PluginError(f + ": descriptor struct_size " + std::to_string(head[2]) + " is too small to be a descriptor");
}

// Kind, name, version, description, the functions the kind requires and the parameter table's
// count. Returns how later messages name the plugin ("FILE: plugin 'NAME'").
std::string check_descriptor(const headsep_plugin_descriptor& d, const std::string& f, std::uint32_t struct_size) {
  auto missing = [&](const char* field, const char* what) {
    std::string who = name_problem(d.name, false).empty() ? std::string("plugin '") + d.name + "'" : std::string("plugin");
    return PluginError(f + ": " + who + " lacks required descriptor field '" + field + "' (" + what +
                       "; NULL or beyond its struct_size of " + std::to_string(struct_size) + " bytes)");
  };
  if (d.kind != HEADSEP_KIND_SCENARIO && d.kind != HEADSEP_KIND_WEIGHTING)
    throw PluginError(f + ": unknown plugin kind " + std::to_string(d.kind) + " (1 = scenario, 2 = weighting)");
  if (!d.name) throw missing("name", "the plugin's name");
  if (auto p = name_problem(d.name, false); !p.empty()) throw PluginError(f + ": invalid plugin name: the name " + p);
  const std::string who = f + ": plugin '" + d.name + "'";
  if (std::string_view(d.name) == "scenario" || std::string_view(d.name) == "weighting")
    throw PluginError(who + ": the name is reserved ('-p " + d.name + ".key=value' addresses the " + d.name + " plugin)");
  if (!d.version) throw missing("version", "a version string");
  if (!d.description) throw missing("description", "a one-line description");
  if (auto p = text_problem(d.version); !p.empty()) throw PluginError(who + ": version " + p);
  if (auto p = text_problem(d.description, true); !p.empty()) throw PluginError(who + ": description " + p);
  auto code = [&](const void* fn, const char* field) {
    if (fn && !is_code(fn))
      throw PluginError(who + ": descriptor field '" + field + "' does not point to code (a function pointer was expected)");
  };
  for (auto [fn, field] : {std::pair<const void*, const char*>{reinterpret_cast<const void*>(d.last_error), "last_error"},
                           {reinterpret_cast<const void*>(d.open), "open"}, {reinterpret_cast<const void*>(d.describe), "describe"},
                           {reinterpret_cast<const void*>(d.next_chunk), "next_chunk"}, {reinterpret_cast<const void*>(d.close), "close"},
                           {reinterpret_cast<const void*>(d.create), "create"},
                           {reinterpret_cast<const void*>(d.describe_weighting), "describe_weighting"},
                           {reinterpret_cast<const void*>(d.weights), "weights"}, {reinterpret_cast<const void*>(d.destroy), "destroy"}})
    code(fn, field);
  if (!d.last_error) throw missing("last_error", "function");
  if (d.kind == HEADSEP_KIND_SCENARIO) {
    if (!d.open) throw missing("open", "function");
    if (!d.describe) throw missing("describe", "function");
    if (!d.next_chunk) throw missing("next_chunk", "function");
    if (!d.close) throw missing("close", "function");
  } else {
    if (!d.create) throw missing("create", "function");
    if (!d.describe_weighting) throw missing("describe_weighting", "function");
    if (!d.weights) throw missing("weights", "function");
    if (!d.destroy) throw missing("destroy", "function");
  }
  if (d.n_params > lim::max_params)
    throw PluginError(who + ": n_params = " + std::to_string(d.n_params) + " is over the limit of " +
                      std::to_string(lim::max_params));
  if (d.n_params && !d.params) throw missing("params", "a table of n_params entries");
  return who;
}

}  // namespace

std::string last_error_of(const Entry& e) {
  const char* m = nullptr;
  try {
    support::InFlight in_flight(e.in_flight.c_str(), "last_error()");
    m = e.d.last_error();
  } catch (...) {
  }
  // Bounded before it is copied (a 10 MB message was echoed whole) and escaped (ESC, CR/LF).
  return m && *m ? printable(std::string_view(m, strnlen(m, 4096)), 1000) : std::string("(the plugin gave no message)");
}

std::shared_ptr<Entry> entry_from_descriptor(const headsep_plugin_descriptor* raw, const std::string& f) {
  // Version check first: nothing else of a foreign major is read or called.
  std::uint32_t head[3];
  std::memcpy(head, raw, sizeof head);
  check_abi(head, f);
  auto e = std::make_shared<Entry>();
  // Whole fields only: a pointer that struct_size covers in part is absent, not half-read (found
  // by tests/fuzz: struct_size 36 copied half of `description`, and strnlen read a wild pointer).
  // The first 16 bytes are whole (checked above) and every field from `name` on starts 8-byte
  // aligned (n_params, 4 bytes, shares its 8 with padding: alone, without `params`, it is moot).
  std::memcpy(&e->d, raw, std::min<std::size_t>(head[2], sizeof(headsep_plugin_descriptor)) / alignof(void*) * alignof(void*));
  const auto& d = e->d;
  const std::string who = check_descriptor(d, f, head[2]);
  PluginInfo& info = e->info;
  info.kind = static_cast<PluginKind>(d.kind);
  info.name = d.name;
  info.version = d.version;
  info.description = d.description;
  info.abi_major = head[0];
  info.abi_minor = head[1];
  info.params = declared_params(who, d.params, d.n_params);
  e->in_flight = info.label();
  return e;
}

std::shared_ptr<Entry> load_entry(const fs::path& file) {
  const std::string f = file.string();
  auto lib = open_library(file, f);
  auto e = entry_from_descriptor(call_entry(*lib, f), f);
  e->lib = std::move(lib);
  e->info.file = file;
  e->in_flight = e->info.label();  // the crash handler's name for it, with its file
  return e;
}

}  // namespace host

// ---- public API ---------------------------------------------------------------------------

std::string_view to_string(PluginKind kind) noexcept { return kind == PluginKind::scenario ? "scenario" : "weighting"; }

std::string PluginInfo::label() const {
  return std::string(to_string(kind)) + " plugin '" + name + "' (" + (origin.empty() ? file.string() : origin) + ")";
}

PluginInfo inspect_plugin(const fs::path& file) { return host::load_entry(file)->info; }

}  // namespace headsep
