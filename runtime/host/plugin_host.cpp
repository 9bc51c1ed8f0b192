// The host side of the plugin ABI: discovery, version checks, and RAII wrappers that turn a
// loaded plugin into a ReportSource or a Weighting. See include/headsep/plugin.h and
// docs/PLUGINS.md for the contract checked here.
#include "headsep/plugin_host.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <type_traits>

#include "headsep/plugin.h"
#include "host/attention_spec.hpp"
#include "support/text_util.hpp"

namespace headsep {

namespace fs = std::filesystem;

struct PluginRegistry::Entry {
  std::shared_ptr<boost::dll::shared_library> lib;
  headsep_plugin_descriptor d{};  // the plugin's descriptor, fields beyond its struct_size zeroed
  PluginInfo info;
};

namespace {

using Entry = PluginRegistry::Entry;

std::string last_error_of(const Entry& e) {
  const char* m = nullptr;
  try {
    m = e.d.last_error();
  } catch (...) {
  }
  return m && *m ? std::string(m) : std::string("(the plugin gave no message)");
}

namespace lim = plugin_limits;

// True when some x[i] is inf or NaN. x * 0 is ±0 for finite x and NaN (exponent bits all set)
// otherwise, so one OR over the products answers: a branch-free pass, vectorised (AVX2 clone).
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
bool any_nonfinite(const double* x, std::uint64_t n) {
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits |= std::bit_cast<std::uint64_t>(x[i] * 0.0);
  return (bits & 0x7ff0000000000000ULL) != 0;
}

// A string a plugin gave, fit for a message: control bytes and invalid UTF-8 as \xNN, cut at 80 bytes.
std::string shown(std::string_view s) {
  const bool utf8 = !find_invalid_utf8(s);
  std::size_t cut = std::min<std::size_t>(s.size(), 80);
  while (utf8 && cut > 0 && cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out;
  for (std::size_t i = 0; i < cut; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut < s.size()) out += "...";
  return out;
}

// Plugin names: [a-z0-9_-]+; parameter names: [A-Za-z0-9_-]+; both at most max_name_bytes and
// never containing '.', which `-p NAME.key=value` uses as the separator. Empty = valid.
std::string name_problem(const char* s, bool upper_ok) {
  if (!s) return "is NULL";
  const std::size_t n = strnlen(s, lim::max_name_bytes + 1);
  if (n == 0) return "is empty";
  if (n > lim::max_name_bytes) return "is longer than " + std::to_string(lim::max_name_bytes) + " bytes";
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    (upper_ok && c >= 'A' && c <= 'Z');
    if (!ok)
      return "'" + shown(s) + "' has the character '" + shown(std::string_view(s + i, 1)) + "' (allowed: " +
             (upper_ok ? "A-Z, " : "") + "a-z, 0-9, '_', '-')";
  }
  return {};
}

// Feature and scenario names (and other text a plugin declares): non-NULL, valid UTF-8, at most
// max_label_bytes, non-empty unless empty_ok. Empty = valid.
std::string text_problem(const char* s, bool empty_ok = false) {
  if (!s) return "is NULL";
  const std::size_t n = strnlen(s, lim::max_label_bytes + 1);
  if (n == 0 && !empty_ok) return "is empty";
  if (n > lim::max_label_bytes) return "is longer than " + std::to_string(lim::max_label_bytes) + " bytes";
  if (auto bad = find_invalid_utf8(std::string_view(s, n)))
    return "'" + shown(std::string_view(s, n)) + "' is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")";
  return {};
}

// Checks a name table a plugin returned: the array, each entry, duplicates and the count limit.
// `what` names one entry ("feature", "scenario"); `field` the array. Returns the names or throws
// PluginError(prefix + problem).
std::vector<std::string> checked_names(const std::string& prefix, const char* field, const char* count_field,
                                       const char* what, std::uint32_t n, const char* const* names,
                                       std::uint32_t limit) {
  if (n > limit)
    throw PluginError(prefix + count_field + " = " + std::to_string(n) + " is over the limit of " + std::to_string(limit));
  if (n && !names)
    throw PluginError(prefix + field + " is NULL but " + count_field + " = " + std::to_string(n));
  std::vector<std::string> out;
  out.reserve(n);
  std::map<std::string_view, std::uint32_t> seen;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (auto p = text_problem(names[i]); !p.empty())
      throw PluginError(prefix + what + " name " + std::to_string(i + 1) + " of " + std::to_string(n) + " (" + field +
                        "[" + std::to_string(i) + "]) " + p);
    out.emplace_back(names[i]);
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    auto [it, inserted] = seen.try_emplace(out[i], i);
    if (!inserted)
      throw PluginError(prefix + what + " '" + shown(out[i]) + "' is listed twice (" + what + "s " +
                        std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + "; names must be unique)");
  }
  return out;
}

std::optional<std::string> canonical_value(ParamType t, const std::string& v);
std::string type_help(ParamType t);

std::shared_ptr<Entry> load_entry(const fs::path& file) {
  const std::string f = file.string();
  auto lib = std::make_shared<boost::dll::shared_library>();
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
  if (!lib->has(HEADSEP_PLUGIN_ENTRY_SYMBOL))
    throw PluginError(f + ": no entry symbol '" HEADSEP_PLUGIN_ENTRY_SYMBOL
                          "' (not a headsep plugin, or the symbol is not exported: use HEADSEP_PLUGIN_EXPORT or the SDK macros)");
  const headsep_plugin_descriptor* raw = nullptr;
  try {
    raw = lib->get<const headsep_plugin_descriptor*()>(HEADSEP_PLUGIN_ENTRY_SYMBOL)();
  } catch (...) {
    throw PluginError(f + ": " HEADSEP_PLUGIN_ENTRY_SYMBOL "() threw an exception");
  }
  if (!raw) throw PluginError(f + ": " HEADSEP_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  // Version check first: nothing else of a foreign major is read or called.
  std::uint32_t head[3];
  std::memcpy(head, raw, sizeof head);
  const std::string ours = std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + "." + std::to_string(HEADSEP_PLUGIN_ABI_MINOR);
  if (head[0] != HEADSEP_PLUGIN_ABI_MAJOR)
    throw PluginError(f + ": built for plugin ABI " + std::to_string(head[0]) + "." + std::to_string(head[1]) +
                      ", but this headsep speaks ABI " + ours + " and loads only major version " +
                      std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + " (rebuild the plugin against this headsep's plugin.h)");
  if (head[2] < offsetof(headsep_plugin_descriptor, kind) + sizeof(std::uint32_t))
    throw PluginError(f + ": descriptor struct_size " + std::to_string(head[2]) + " is too small to be a descriptor");
  auto e = std::make_shared<Entry>();
  e->lib = std::move(lib);
  // Whole fields only: a pointer that struct_size covers in part is absent, not half-read (found
  // by tests/fuzz: struct_size 36 copied half of `description`, and strnlen read a wild pointer).
  // The first 16 bytes are whole (checked above) and every field from `name` on starts 8-byte
  // aligned (n_params, 4 bytes, shares its 8 with padding: alone, without `params`, it is moot).
  std::memcpy(&e->d, raw, std::min<std::size_t>(head[2], sizeof(headsep_plugin_descriptor)) / alignof(void*) * alignof(void*));
  const auto& d = e->d;
  auto missing = [&](const char* field, const char* what) {
    std::string who = name_problem(d.name, false).empty() ? std::string("plugin '") + d.name + "'" : std::string("plugin");
    return PluginError(f + ": " + who + " lacks required descriptor field '" + field + "' (" + what +
                       "; NULL or beyond its struct_size of " + std::to_string(head[2]) + " bytes)");
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
  PluginInfo& info = e->info;
  info.kind = static_cast<PluginKind>(d.kind);
  info.name = d.name;
  info.version = d.version;
  info.description = d.description;
  info.abi_major = head[0];
  info.abi_minor = head[1];
  info.file = file;
  std::set<std::string> seen;
  for (std::uint32_t i = 0; i < d.n_params; ++i) {
    const auto& p = d.params[i];
    if (auto why = name_problem(p.name, true); !why.empty())
      throw PluginError(who + ": parameter " + std::to_string(i + 1) + " has an invalid name: the name " + why);
    if (p.type < HEADSEP_PARAM_STRING || p.type > HEADSEP_PARAM_BOOL)
      throw PluginError(who + ": parameter '" + p.name + "' has unknown type " + std::to_string(p.type));
    if (!seen.insert(p.name).second) throw PluginError(who + ": parameter '" + std::string(p.name) + "' declared twice");
    PluginParamInfo pi;
    pi.name = p.name;
    pi.type = static_cast<ParamType>(p.type);
    if (p.default_value) {
      // Defaults reach open()/create() as they are, so they must pass the check user values pass.
      auto c = text_problem(p.default_value, true).empty() ? canonical_value(pi.type, p.default_value) : std::nullopt;
      if (!c)
        throw PluginError(who + ": parameter '" + pi.name + "' (" + std::string(to_string(pi.type)) + ") has the default '" +
                          shown(p.default_value) + "', which is not " + type_help(pi.type));
      pi.default_value = std::move(*c);
    }
    if (p.help) {
      if (auto why = text_problem(p.help, true); !why.empty()) throw PluginError(who + ": help of parameter '" + pi.name + "' " + why);
      pi.help = p.help;
    }
    info.params.push_back(std::move(pi));
  }
  return e;
}

// ---- parameters ---------------------------------------------------------------------------

std::optional<std::string> canonical_value(ParamType t, const std::string& v) {
  switch (t) {
    case ParamType::string:
      return v;
    case ParamType::integer: {
      std::int64_t x = 0;
      const char* b = v.data() + (v.size() > 1 && v[0] == '+' ? 1 : 0);
      auto [p, ec] = std::from_chars(b, v.data() + v.size(), x);
      if (ec != std::errc() || p != v.data() + v.size() || b == v.data() + v.size()) return std::nullopt;
      return std::to_string(x);
    }
    case ParamType::real:  // the CSV's number grammar (text_util.hpp; docs/PLUGINS.md "Parameter values")
      return canonical_double(v);
    case ParamType::boolean: {
      std::string l;
      for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (l == "true" || l == "1" || l == "yes" || l == "on") return std::string("true");
      if (l == "false" || l == "0" || l == "no" || l == "off") return std::string("false");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string type_help(ParamType t) {
  switch (t) {
    case ParamType::string: return "a string";
    case ParamType::integer: return "an integer";
    case ParamType::real: return "a finite number";
    case ParamType::boolean: return "a boolean (true/false, 1/0, yes/no, on/off)";
  }
  return "?";
}

std::string param_list(const PluginInfo& p) {
  std::string s;
  for (const auto& q : p.params) s += (s.empty() ? "" : ", ") + q.name;
  return s.empty() ? "(none)" : s;
}

std::vector<headsep_param> c_params(const PluginParams& resolved) {
  std::vector<headsep_param> v;
  for (const auto& [k, val] : resolved) v.push_back({k.c_str(), val.c_str()});
  return v;
}

// ---- scenario generators ------------------------------------------------------------------

class PluginSource;
struct ChunkSink;

// Calls through a headsep_chunk_out after the next_chunk call that received it returned (a plugin
// that kept the pointer): refused, and the first one recorded so the run fails naming the plugin.
struct LateCalls {
  std::atomic<bool> any{false};
  std::mutex mutex;
  std::string what;

  void record(std::uint64_t chunk, const char* callback) {
    std::lock_guard lock(mutex);
    if (what.empty())
      what = std::string(callback) + " was called through the headsep_chunk_out of chunk " + std::to_string(chunk) +
             " after that next_chunk call had returned (refused: `out` and every buffer it gave are valid only "
             "during the next_chunk call that received them)";
    any.store(true, std::memory_order_release);
  }
  std::string message() {
    std::lock_guard lock(mutex);
    return what;
  }
};

// What the plugin's `out` points to. Slots are owned by the source for its whole life and reused
// in FIFO order (never while in use), so a kept pointer reaches a slot that refuses the call
// instead of dead stack memory. `sink` is the state of the call in progress, null between calls.
struct ChunkSlot {
  headsep_chunk_out c{};  // first member: callbacks cast the pointer back
  std::atomic<ChunkSink*> sink{nullptr};
  std::atomic<std::uint64_t> chunk{0};
  LateCalls* late = nullptr;
};
static_assert(std::is_standard_layout_v<ChunkSlot>, "headsep_chunk_out* must convert back to ChunkSlot*");

class SlotPool {
 public:
  explicit SlotPool(LateCalls& late) : late_(&late) {}
  ChunkSlot* take(std::uint64_t chunk) {
    std::lock_guard lock(mutex_);
    ChunkSlot* s = nullptr;
    if (free_.size() > kRotation) {
      s = free_.front();
      free_.pop_front();
    } else {
      all_.push_back(std::make_unique<ChunkSlot>());
      s = all_.back().get();
      s->late = late_;
    }
    s->chunk.store(chunk, std::memory_order_relaxed);
    return s;
  }
  void give(ChunkSlot* s) {
    std::lock_guard lock(mutex_);
    free_.push_back(s);
  }

 private:
  // A released slot waits for this many others before it is reused, so a pointer kept from one
  // call and used in the next ones lands on an idle slot (and is caught), not on a live one.
  static constexpr std::size_t kRotation = 8;
  LateCalls* late_;
  std::mutex mutex_;
  std::deque<std::unique_ptr<ChunkSlot>> all_;
  std::deque<ChunkSlot*> free_;
};

// The host side of headsep_chunk_out: callbacks write straight into a ReportBatch.
struct ChunkSink {
  headsep_chunk_out c;  // the callbacks; copied into the ChunkSlot the plugin sees
  ReportBatch* b = nullptr;
  std::uint64_t max_reports = 0, n_reports = 0;
  std::uint32_t n_features = 0, given_heads = 0;
  bool offsets_set = false, embeddings_set = false;
  std::uint32_t d_model = 0;
  std::vector<char> feature_set;
  std::vector<std::string> scenarios;
  std::string error;
  bool dead = false;  // the sink late calls get: refuses everything

  // The state of the call `o` belongs to; for a late call, a sink that refuses everything (and
  // the call is recorded). Every callback goes through here.
  static ChunkSink* self(headsep_chunk_out* o, const char* callback = "a headsep_chunk_out callback") {
    auto* slot = reinterpret_cast<ChunkSlot*>(o);
    if (ChunkSink* s = slot->sink.load(std::memory_order_acquire)) return s;
    slot->late->record(slot->chunk.load(std::memory_order_relaxed), callback);
    thread_local ReportBatch scratch;
    thread_local ChunkSink refusing(scratch, 0, 0, 0);
    refusing.dead = true;
    refusing.error.clear();
    return &refusing;
  }
  static std::uint64_t* token_offsets(headsep_chunk_out* o, std::uint64_t n) {
    auto* s = self(o, "token_offsets()");
    if (s->dead) return nullptr;
    if (s->offsets_set) return s->fail<std::uint64_t>("token_offsets() called twice");
    if (n == 0 || n > s->max_reports)
      return s->fail<std::uint64_t>("token_offsets(" + std::to_string(n) + "): a chunk holds 1.." +
                                    std::to_string(s->max_reports) + " reports");
    try {
      s->b->token_offset.resize(n + 1);
    } catch (...) {
      return s->fail<std::uint64_t>("out of memory for token offsets");
    }
    s->offsets_set = true;
    s->n_reports = n;
    return s->b->token_offset.data();
  }
  static double* feature(headsep_chunk_out* o, std::uint32_t f, std::uint64_t n) {
    auto* s = self(o, "feature()");
    if (s->dead) return nullptr;
    if (f >= s->n_features)
      return s->fail<double>("feature(" + std::to_string(f) + "): the schema has " + std::to_string(s->n_features) + " features");
    if (n > lim::max_chunk_tokens) return s->fail<double>(too_many_tokens("feature", n));
    try {
      s->b->features[f].resize(n);
    } catch (...) {
      return s->fail<double>("out of memory for feature values");
    }
    s->feature_set[f] = 1;
    return s->b->features[f].data();
  }
  static std::int32_t scenario(headsep_chunk_out* o, const char* name, std::uint64_t len) {
    auto* s = self(o, "scenario()");
    if (s->dead) return 1;
    if (!name || len == 0) return s->fail_code("scenario(): empty scenario name");
    if (len > lim::max_label_bytes)
      return s->fail_code("scenario(): a name of " + std::to_string(len) + " bytes (the limit is " +
                          std::to_string(lim::max_label_bytes) + ")");
    if (auto bad = find_invalid_utf8(std::string_view(name, len)))
      return s->fail_code("scenario(): the name '" + shown(std::string_view(name, len)) + "' is not valid UTF-8 (byte " +
                          std::to_string(*bad + 1) + ")");
    if (s->scenarios.size() >= lim::max_scenarios)
      return s->fail_code("scenario(): more than " + std::to_string(lim::max_scenarios) + " scenarios in one chunk");
    try {
      s->scenarios.emplace_back(name, len);
    } catch (...) {
      return s->fail_code("out of memory");
    }
    return 0;
  }
  static double* given_weights(headsep_chunk_out* o, std::uint32_t slot, std::uint32_t row, std::uint64_t n) {
    auto* s = self(o, "given_weights()");
    if (s->dead) return nullptr;
    if (s->given_heads == 0) return s->fail<double>("given_weights(): the schema declares no given heads");
    if (row > s->given_heads || slot >= lim::max_scenarios)
      return s->fail<double>("given_weights(" + std::to_string(slot) + ", " + std::to_string(row) + "): row must be 0.." +
                             std::to_string(s->given_heads) + " and slot below " + std::to_string(lim::max_scenarios));
    if (n > lim::max_chunk_tokens) return s->fail<double>(too_many_tokens("given_weights", n));
    const std::size_t i = std::size_t(slot) * (std::size_t(s->given_heads) + 1) + row;
    try {
      if (s->b->given_weights.size() <= i) s->b->given_weights.resize(i + 1);
      s->b->given_weights[i].resize(n);
    } catch (...) {
      return s->fail<double>("out of memory for given weights");
    }
    return s->b->given_weights[i].data();
  }
  static std::int32_t report_id(headsep_chunk_out* o, const char* id, std::uint64_t len) {
    auto* s = self(o, "report_id()");
    if (s->dead) return 1;
    auto& ids = s->b->report_ids;
    if (!id && len) return s->fail_code("report_id(): NULL id of length " + std::to_string(len));
    if (ids.size() >= (s->offsets_set ? s->n_reports : s->max_reports))
      return s->fail_code("report_id(): more ids than the chunk's " +
                          std::to_string(s->offsets_set ? s->n_reports : s->max_reports) + " reports");
    const std::string_view v(id ? id : "", len);
    if (auto bad = find_invalid_utf8(v))
      return s->fail_code("report_id(): id " + std::to_string(ids.size() + 1) + " of the chunk, '" + shown(v) +
                          "', is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")");
    try {
      ids.emplace_back(v);
    } catch (...) {
      return s->fail_code("out of memory");
    }
    return 0;
  }
  static float* embeddings(headsep_chunk_out* o, std::uint64_t n) {
    auto* s = self(o);
    if (s->d_model == 0) return s->fail<float>("embeddings(): the schema declares no embeddings (d_model = 0)");
    // The chunk token limit first, as feature() has it (found by tests/fuzz: 2^31+1 tokens passed
    // the 2^40-floats bound and the host tried to allocate 8 GB for a malformed request).
    if (n > lim::max_chunk_tokens) return s->fail<float>(too_many_tokens("embeddings", n));
    if (n > (std::uint64_t(1) << 40) / s->d_model) return s->fail<float>("embeddings(" + std::to_string(n) + "): too many tokens");
    try {
      s->b->embeddings.resize(n * s->d_model);
    } catch (...) {
      return s->fail<float>("out of memory for embeddings");
    }
    s->embeddings_set = true;
    return s->b->embeddings.data();
  }
  static std::int32_t token_name(headsep_chunk_out* o, const char* name, std::uint64_t len) {
    auto* s = self(o, "token_name()");
    if (s->dead) return 1;
    auto& names = s->b->token_names;
    if (!name && len) return s->fail_code("token_name(): NULL name of length " + std::to_string(len));
    if (names.size() >= lim::max_chunk_tokens) return s->fail_code(too_many_tokens("token_name", names.size() + 1));
    const std::string_view v(name ? name : "", len);
    if (auto bad = find_invalid_utf8(v))
      return s->fail_code("token_name(): name " + std::to_string(names.size() + 1) + " of the chunk, '" + shown(v) +
                          "', is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")");
    try {
      names.emplace_back(v);
    } catch (...) {
      return s->fail_code("out of memory");
    }
    return 0;
  }

  static std::string too_many_tokens(const char* fn, std::uint64_t n) {
    return std::string(fn) + "(): " + std::to_string(n) + " tokens (a chunk holds at most " +
           std::to_string(lim::max_chunk_tokens) + ")";
  }
  template <class T>
  T* fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return nullptr;
  }
  std::int32_t fail_code(std::string why) {
    if (error.empty()) error = std::move(why);
    return 1;
  }

  ChunkSink(ReportBatch& batch, std::uint64_t max, std::uint32_t features, std::uint32_t heads)
      : b(&batch), max_reports(max), n_features(features), given_heads(heads), feature_set(features, 0) {
    c = headsep_chunk_out{};
    c.struct_size = sizeof(headsep_chunk_out);
    c.token_offsets = &token_offsets;
    c.feature = &feature;
    c.scenario = &scenario;
    c.given_weights = &given_weights;
    c.report_id = &report_id;
    c.token_name = &token_name;
    c.embeddings = &embeddings;
    // Reuse the batch's buffers without zeroing: the plugin writes every element it asks for.
    b->features.resize(features);
    b->report_ids.clear();
    b->token_names.clear();
    b->scenarios.clear();
    b->given_weights.clear();
    b->source_rows = 0;
  }
};

class PluginSource final : public ReportSource {
 public:
  PluginSource(std::shared_ptr<const Entry> e, const PluginParams& resolved) : e_(std::move(e)) {
    const auto& d = e_->d;
    auto cp = c_params(resolved);
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    try {
      st = d.open(cp.data(), static_cast<std::uint32_t>(cp.size()), &state_);
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown";
    }
    if (!thrown.empty()) throw PluginError(e_->info.label() + ": open() let a C++ exception escape: " + thrown);
    if (st != HEADSEP_OK) throw PluginError(e_->info.label() + ": open failed: " + last_error_of(*e_));
    if (!state_) state_ = nullptr;  // a NULL state is allowed (stateless plugins)
    headsep_schema cs{};
    try {
      st = d.describe(state_, &cs);
    } catch (...) {
      st = HEADSEP_ERROR;
    }
    if (st != HEADSEP_OK) {
      std::string msg = last_error_of(*e_);
      d.close(state_);
      throw PluginError(e_->info.label() + ": describe failed: " + msg);
    }
    try {
      check_schema(cs);  // before anything is copied out of it
      for (std::uint32_t i = 0; i < cs.n_features; ++i) schema_.feature_names.emplace_back(cs.feature_names[i]);
      for (std::uint32_t i = 0; i < cs.n_scenarios; ++i) intern(cs.scenario_names[i]);
      schema_.given_heads = cs.given_heads;
      // ABI 1.1: a 1.0 plugin's schema ends before d_model (the host zeroed it).
      if (cs.struct_size >= offsetof(headsep_schema, d_model) + sizeof(cs.d_model)) schema_.d_model = cs.d_model;
      if (schema_.d_model > 65536)
        throw PluginError(e_->info.label() + ": declares d_model " + std::to_string(schema_.d_model) + " (at most 65536)");
      schema_.names_scenarios = (cs.flags & HEADSEP_SCHEMA_NAMES_SCENARIOS) != 0 || cs.given_heads > 0;
      random_ = (cs.flags & HEADSEP_SCHEMA_RANDOM_ACCESS) != 0;
      total_ = cs.total_reports;
    } catch (...) {
      d.close(state_);
      throw;
    }
  }
  ~PluginSource() override {
    try {
      e_->d.close(state_);
    } catch (...) {
    }
  }

  const Schema& schema() const override { return schema_; }
  std::string label() const override { return e_->info.label(); }
  std::uint64_t rows_read() const override { return rows_read_; }
  bool random_access() const override { return random_; }
  std::uint64_t total_reports() const override { return total_; }

  bool next(ReportBatch& batch, std::size_t max_reports) override {
    if (ended_) return false;
    const std::uint64_t index = next_index_;
    std::vector<std::string> names;
    if (!produce(index, max_reports, emitted_, batch, names, &rows_read_)) {
      ended_ = true;
      if (total_ && emitted_ != total_)
        throw PluginError(e_->info.label() + ": chunk " + std::to_string(index) + ": next_chunk returned END after " +
                          std::to_string(emitted_) + " reports, but describe() declared total_reports = " +
                          std::to_string(total_));
      return false;
    }
    ++next_index_;
    for (const auto& n : names) batch.scenarios.push_back(intern(n));
    batch.first_report = emitted_;
    emitted_ += batch.n_reports();
    if (total_ && emitted_ > total_)
      throw PluginError(e_->info.label() + ": chunk " + std::to_string(index) + " brings the number of reports to " +
                        std::to_string(emitted_) + ", more than the total_reports = " + std::to_string(total_) +
                        " describe() declared");
    return true;
  }

  bool fill(std::uint64_t index, std::size_t chunk_reports, ReportBatch& batch) const override {
    if (!random_) throw PluginError(e_->info.label() + ": fill() called on a generator without random access");
    std::vector<std::string> names;
    const bool got = produce(index, chunk_reports, first_of(index, chunk_reports), batch, names, nullptr);
    check_random_access_count(index, chunk_reports, got ? batch.n_reports() : 0, got);
    if (!got) return false;
    for (const auto& n : names) {
      auto it = ids_.find(n);
      if (it == ids_.end())
        throw PluginError(e_->info.label() + ": chunk " + std::to_string(index) + " names scenario '" + n +
                          "', which describe() did not list (random-access generators must list every scenario)");
      batch.scenarios.push_back(it->second);
    }
    batch.first_report = index * chunk_reports;
    return true;
  }

 private:
  // describe()'s schema: the name arrays and every entry (non-NULL, non-empty, UTF-8, unique) and
  // the declared counts against plugin_limits.
  void check_schema(const headsep_schema& cs) const {
    const std::string prefix = e_->info.label() + ": describe(): ";
    checked_names(prefix, "feature_names", "n_features", "feature", cs.n_features, cs.feature_names, lim::max_features);
    checked_names(prefix, "scenario_names", "n_scenarios", "scenario", cs.n_scenarios, cs.scenario_names,
                  lim::max_scenarios);
    if (cs.given_heads > lim::max_heads)
      throw PluginError(prefix + "given_heads = " + std::to_string(cs.given_heads) + " is over the limit of " +
                        std::to_string(lim::max_heads));
  }

  // Global index of the first report of random-access chunk `index` (saturating).
  static std::uint64_t first_of(std::uint64_t index, std::uint64_t max_reports) {
    std::uint64_t first = 0;
    return __builtin_mul_overflow(index, max_reports, &first) ? UINT64_MAX : first;
  }

  // Random access: chunk i holds exactly the reports [i*max, (i+1)*max) that exist: min(max, total -
  // i*max) of them when total_reports is declared, else max except in the last chunk. A chunk that
  // ends the stream (END, short, or the last of the total) is followed by one probe of the next
  // chunk, which must be END: the engine stops there and would silently drop anything after it.
  void check_random_access_count(std::uint64_t index, std::uint64_t max, std::uint64_t n, bool got) const {
    const std::uint64_t first = first_of(index, max);
    auto where = [&] { return e_->info.label() + ": chunk " + std::to_string(index); };
    auto chunk = [&] { return "chunk " + std::to_string(index); };
    if (total_) {
      const std::uint64_t want = first >= total_ ? 0 : std::min(max, total_ - first);
      auto rule = [&] {
        return " (random access: chunk i holds reports [i*max_reports, (i+1)*max_reports) of total_reports = " +
               std::to_string(total_) + ", max_reports = " + std::to_string(max) + ")";
      };
      if (!got && want)
        throw PluginError(where() + ": next_chunk returned END, but reports " + std::to_string(first) + ".." +
                          std::to_string(first + want - 1) + " are still to come" + rule());
      if (got && n != want)
        throw PluginError(where() + " holds " + std::to_string(n) + " reports instead of " + std::to_string(want) + rule());
      if (got && first + n == total_)
        expect_end(index + 1, max, chunk() + " ends the declared total_reports = " + std::to_string(total_));
    } else if (got && n < max) {
      expect_end(index + 1, max, chunk() + " holds " + std::to_string(n) + " < max_reports = " + std::to_string(max) +
                                     " reports, so it must be the last (random access)");
    } else if (!got) {
      expect_end(index + 1, max, chunk() + " returned END (random access: no report follows it)");
    }
  }
  void expect_end(std::uint64_t index, std::uint64_t max, const std::string& why) const {
    ReportBatch scratch;
    std::vector<std::string> names;
    if (produce(index, max, first_of(index, max), scratch, names, nullptr))
      throw PluginError(e_->info.label() + ": chunk " + std::to_string(index) + " holds " +
                        std::to_string(scratch.n_reports()) + " reports, but " + why);
  }

  // Every feature value must be finite. Called only when a branch-free pass found one that is not.
  [[noreturn]] void throw_nonfinite(const ReportBatch& b, std::size_t f, const std::string& where) const {
    const auto& x = b.features[f];
    for (std::size_t r = 0; r < b.n_reports(); ++r)
      for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t)
        if (!std::isfinite(x[t])) {
          char v[32];
          std::snprintf(v, sizeof v, "%g", x[t]);
          throw PluginError(where + ": report '" + b.report_id(r) + "' (report " + std::to_string(r + 1) +
                            " of the chunk): feature '" + schema_.feature_names[f] + "' of token " +
                            std::to_string(t - b.token_offset[r] + 1) + " is " + v + " (feature values must be finite)");
        }
    throw PluginError(where + ": feature '" + schema_.feature_names[f] + "' holds a non-finite value");
  }

  std::uint32_t intern(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<std::uint32_t>(schema_.scenario_names.size()));
    if (inserted) schema_.scenario_names.push_back(name);
    return it->second;
  }

  // One next_chunk call, validated. False at the end. Thread-safe when the plugin is random access.
  // Validation is O(reports + tokens x features): branch-free passes, the search only on failure.
  bool produce(std::uint64_t index, std::uint64_t max_reports, std::uint64_t first_report, ReportBatch& batch,
               std::vector<std::string>& names, std::uint64_t* rows_read) const {
    if (max_reports == 0) throw Error("chunk size must be at least 1 report");
    ChunkSink sink(batch, max_reports, static_cast<std::uint32_t>(schema_.feature_names.size()), schema_.given_heads);
    sink.d_model = schema_.d_model;
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    batch.first_report = first_report;
    // The plugin sees a long-lived slot, live only during this call (see ChunkSlot).
    ChunkSlot* slot = slots_.take(index);
    slot->c = sink.c;
    slot->sink.store(&sink, std::memory_order_release);
    try {
      st = e_->d.next_chunk(state_, index, max_reports, &slot->c);
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown exception";
    }
    slot->sink.store(nullptr, std::memory_order_release);
    sink.c.source_rows = slot->c.source_rows;
    sink.c.rows_read = slot->c.rows_read;
    slots_.give(slot);
    const std::string where = e_->info.label() + ": chunk " + std::to_string(index);
    if (late_.any.load(std::memory_order_acquire)) throw PluginError(e_->info.label() + ": " + late_.message());
    if (!thrown.empty()) throw PluginError(where + ": next_chunk() let a C++ exception escape the C ABI: " + thrown);
    if (rows_read) *rows_read = std::max(*rows_read, sink.c.rows_read);
    if (st == HEADSEP_END) {
      batch.token_offset.assign(1, 0);
      return false;
    }
    if (st != HEADSEP_OK) {
      throw PluginError(where + ": next_chunk failed: " + (sink.error.empty() ? last_error_of(*e_) : sink.error));
    }
    if (!sink.error.empty()) throw PluginError(where + ": " + sink.error);
    auto bad = [&](const std::string& what) { return PluginError(where + " is malformed: " + what); };
    if (!sink.offsets_set) throw bad("token_offsets() was never called");
    const auto& off = batch.token_offset;
    if (off[0] != 0) throw bad("token_offset[0] must be 0");
    // Branch-free and SSE2-vectorisable (no 64-bit compares): with every offset below 2^63, a
    // decrease sets the top bit of the difference; the exact search runs only when a top bit is set.
    std::uint64_t top = 0;
    for (std::size_t r = 0; r < sink.n_reports; ++r) top |= (off[r + 1] - off[r]) | off[r + 1];
    for (std::size_t r = 0; (top >> 63) && r < sink.n_reports; ++r)
      if (off[r + 1] < off[r]) throw bad("token offsets decrease at report " + std::to_string(r + 1));
    if (off.back() > lim::max_chunk_tokens)
      throw bad(std::to_string(off.back()) + " tokens (a chunk holds at most " + std::to_string(lim::max_chunk_tokens) + ")");
    const std::uint64_t n_tokens = off.back();
    for (std::size_t f = 0; f < schema_.feature_names.size(); ++f) {
      if (!sink.feature_set[f]) throw bad("feature '" + schema_.feature_names[f] + "' was not written");
      if (batch.features[f].size() != n_tokens)
        throw bad("feature '" + schema_.feature_names[f] + "' has " + std::to_string(batch.features[f].size()) +
                  " values for " + std::to_string(n_tokens) + " tokens");
    }
    if (!batch.report_ids.empty() && batch.report_ids.size() != sink.n_reports)
      throw bad(std::to_string(batch.report_ids.size()) + " report ids for " + std::to_string(sink.n_reports) + " reports");
    if (!batch.token_names.empty() && batch.token_names.size() != n_tokens)
      throw bad(std::to_string(batch.token_names.size()) + " token names for " + std::to_string(n_tokens) + " tokens");
    if (schema_.d_model) {
      if (!sink.embeddings_set) throw bad("embeddings() was never called (the schema declares d_model " + std::to_string(schema_.d_model) + ")");
      if (batch.embeddings.size() != n_tokens * schema_.d_model)
        throw bad("embeddings for " + std::to_string(batch.embeddings.size() / schema_.d_model) + " tokens, not " +
                  std::to_string(n_tokens));
    }
    if (schema_.given_heads) {
      if (sink.scenarios.empty()) throw bad("given weights need the chunk's scenarios (scenario() was never called)");
      const std::size_t rows = sink.scenarios.size() * (std::size_t(schema_.given_heads) + 1);
      if (batch.given_weights.size() != rows)
        throw bad("expected given weights for " + std::to_string(sink.scenarios.size()) + " scenarios x " +
                  std::to_string(std::size_t(schema_.given_heads) + 1) + " rows");
      for (std::size_t i = 0; i < rows; ++i)
        if (batch.given_weights[i].size() != n_tokens)
          throw bad("given weight row " + std::to_string(i) + " has " + std::to_string(batch.given_weights[i].size()) +
                    " values for " + std::to_string(n_tokens) + " tokens");
    } else if (!batch.given_weights.empty()) {
      throw bad("given weights written but the schema declares no given heads");
    }
    if (sink.scenarios.size() > 1) {
      std::vector<std::string_view> sorted(sink.scenarios.begin(), sink.scenarios.end());
      std::sort(sorted.begin(), sorted.end());
      if (auto it = std::adjacent_find(sorted.begin(), sorted.end()); it != sorted.end())
        throw bad("scenario '" + shown(*it) + "' is listed twice (each scenario is evaluated once per report)");
    }
    // Feature values must be finite (the search for the culprit only on failure).
    for (std::size_t f = 0; f < schema_.feature_names.size(); ++f)
      if (any_nonfinite(batch.features[f].data(), n_tokens)) throw_nonfinite(batch, f, where);
    batch.source_rows = sink.c.source_rows;
    names = std::move(sink.scenarios);
    return true;
  }

  std::shared_ptr<const Entry> e_;  // keeps the library loaded
  void* state_ = nullptr;
  Schema schema_;
  std::map<std::string, std::uint32_t> ids_;
  bool random_ = false, ended_ = false;
  std::uint64_t total_ = 0;
  std::uint64_t rows_read_ = 0, next_index_ = 0, emitted_ = 0;
  mutable LateCalls late_;
  mutable SlotPool slots_{late_};
};

// ---- weighting schemes --------------------------------------------------------------------

class PluginWeighting final : public Weighting {
 public:
  PluginWeighting(std::shared_ptr<const Entry> e, const PluginParams& resolved, const Schema& schema)
      : e_(std::move(e)), schema_(&schema) {
    const auto& d = e_->d;
    auto cp = c_params(resolved);
    std::vector<const char*> feats, scens;
    for (const auto& f : schema.feature_names) feats.push_back(f.c_str());
    for (const auto& s : schema.scenario_names) scens.push_back(s.c_str());
    headsep_schema cs{};
    cs.struct_size = sizeof cs;
    cs.flags = schema.names_scenarios ? HEADSEP_SCHEMA_NAMES_SCENARIOS : 0u;
    cs.n_features = static_cast<std::uint32_t>(feats.size());
    cs.feature_names = feats.data();
    cs.n_scenarios = static_cast<std::uint32_t>(scens.size());
    cs.scenario_names = scens.data();
    cs.given_heads = schema.given_heads;
    cs.d_model = schema.d_model;  // ABI 1.1
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    try {
      st = d.create(cp.data(), static_cast<std::uint32_t>(cp.size()), &cs, &state_);
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown exception";
    }
    if (!thrown.empty()) throw PluginError(e_->info.label() + ": create() let a C++ exception escape: " + thrown);
    if (st != HEADSEP_OK) throw PluginError(e_->info.label() + ": create failed: " + last_error_of(*e_));
    headsep_weighting_info wi{};
    try {
      st = d.describe_weighting(state_, &wi);
    } catch (...) {
      st = HEADSEP_ERROR;
    }
    auto fail = [&](const std::string& msg) {
      d.destroy(state_);
      return PluginError(e_->info.label() + ": " + msg);
    };
    if (st != HEADSEP_OK) throw fail("describe_weighting failed: " + last_error_of(*e_));
    if (wi.heads > lim::max_heads)
      throw fail("describe_weighting(): heads = " + std::to_string(wi.heads) + " is over the limit of " +
                 std::to_string(lim::max_heads));
    try {  // the scheme's own scenario names, before anything reads them
      checked_names(e_->info.label() + ": describe_weighting(): ", "scenario_names", "n_scenarios", "scenario",
                    wi.n_scenarios, wi.scenario_names, lim::max_scenarios);
    } catch (...) {
      d.destroy(state_);
      throw;
    }
    if (wi.heads == 0) throw fail("declares 0 heads (a scheme has at least one head)");
    // ABI 1.1: attention specs (a 1.0 plugin's info ends before `attention`).
    const headsep_attention_spec* specs =
        wi.struct_size >= offsetof(headsep_weighting_info, attention) + sizeof(wi.attention) ? wi.attention : nullptr;
    // ABI 1.2: flags (unknown bits ignored; each flag is safe to ignore).
    const std::uint32_t flags =
        wi.struct_size >= offsetof(headsep_weighting_info, flags) + sizeof(wi.flags) ? wi.flags : 0u;
    if (wi.layout == HEADSEP_LAYOUT_PER_QUERY && !specs) per_query_ = true;
    else if (wi.layout != HEADSEP_LAYOUT_PER_TOKEN && !specs)
      throw fail("uses weight layout " + std::to_string(wi.layout) +
                 " (per-query), which this headsep (plugin ABI " + std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + "." +
                 std::to_string(HEADSEP_PLUGIN_ABI_MINOR) + ") does not support yet");
    heads_ = wi.heads;
    shared_baseline_ = (flags & HEADSEP_WEIGHTING_SHARED_BASELINE) && !specs && !per_query_;
    all_slots_ = (flags & HEADSEP_WEIGHTING_ALL_SLOTS) && !specs && !per_query_;  // ABI 1.3
    if (specs) {
      const std::uint32_t n_specs = std::max<std::uint32_t>(1, wi.n_scenarios);
      try {
        for (std::uint32_t i = 0; i < n_specs; ++i) {
          auto sp = plan_from_spec(&specs[i], schema, heads_, e_->info.label(), i);
          if (i && sp.reads_features != reads_features_)
            throw PluginError(e_->info.label() + ": every attention spec must read the same input");
          reads_features_ = sp.reads_features;
          plans_.push_back(std::move(sp.plan));
        }
      } catch (...) {
        d.destroy(state_);
        throw;
      }
    }
    for (std::uint32_t i = 0; i < wi.n_scenarios; ++i) own_.emplace_back(wi.scenario_names[i]);
    data_scenarios_ = own_.empty() && schema.names_scenarios;
    if (own_.empty() && !schema.names_scenarios) own_.push_back(e_->info.name);
  }
  ~PluginWeighting() override {
    try {
      e_->d.destroy(state_);
    } catch (...) {
    }
  }

  std::uint32_t heads() const override { return heads_; }
  std::vector<std::string> own_scenarios() const override {
    return data_scenarios_ ? std::vector<std::string>{} : own_;
  }

  void weights(const ReportBatch& b, std::uint32_t slot, WeightBlock& out) const override {
    const std::size_t n_tokens = b.n_tokens();
    // Per-query schemes get rows the engine sized (query_offset's blocks); per-token ones n_tokens.
    const std::size_t row_len = per_query_ ? static_cast<std::size_t>(out.query_offset.at(b.n_reports())) : n_tokens;
    // Every slot at once (ABI 1.3): the engine sized out with WeightBlock::resize(.., slots, shared).
    const bool all = slot == kAllSlots;
    if (all && !all_slots_) throw PluginError(e_->info.label() + ": weights for every slot at once asked of a scheme that did not declare them");
    const std::size_t n_rows = (all ? std::size_t(out.slots) : 1) * (std::size_t(heads_) + 1);
    if (out.rows.size() != n_rows) out.rows.resize(n_rows);
    std::vector<double*> rows(n_rows);
    for (std::size_t i = 0; i < n_rows; ++i) {
      const bool shared_row = all && shared_baseline_ && i > heads_ && i % (std::size_t(heads_) + 1) == 0;
      if (shared_row) continue;  // NULL: slot 0's baseline serves every slot
      if (out.rows[i].size() != row_len) out.rows[i].resize(row_len);
      rows[i] = out.rows[i].data();
    }
    if (!all && out.keep_baseline && shared_baseline_) rows[0] = nullptr;  // slot 0's baseline stays
    std::vector<const double*> feats(b.features.size()), given(b.given_weights.size());
    for (std::size_t f = 0; f < feats.size(); ++f) feats[f] = b.features[f].data();
    for (std::size_t g = 0; g < given.size(); ++g) given[g] = b.given_weights[g].data();
    headsep_batch_view v{};
    v.struct_size = sizeof v;
    v.n_features = static_cast<std::uint32_t>(feats.size());
    v.first_report = b.first_report;
    v.n_reports = b.n_reports();
    v.n_tokens = n_tokens;
    v.token_offset = b.token_offset.data();
    v.features = feats.data();
    v.n_scenarios = static_cast<std::uint32_t>(b.scenarios.size());
    v.n_given_rows = static_cast<std::uint32_t>(given.size());
    v.scenarios = b.scenarios.data();
    v.given_weights = given.data();
    v.d_model = b.embeddings.empty() ? 0u : schema_->d_model;
    v.embeddings = b.embeddings.empty() ? nullptr : b.embeddings.data();
    v.query_offset = out.layout == WeightBlock::Layout::per_query ? out.query_offset.data() : nullptr;
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    try {
      st = e_->d.weights(state_, &v, slot, rows.data());
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown exception";
    }
    if (!thrown.empty()) throw PluginError(e_->info.label() + ": weights() let a C++ exception escape the C ABI: " + thrown);
    if (st != HEADSEP_OK)
      throw PluginError(e_->info.label() + ": weights failed for " +
                        (all ? std::string("every scenario at once") : "scenario '" + scenario_name(b, slot) + "'") +
                        "' (reports " + b.report_id(0) + "..): " + last_error_of(*e_));
    // Weights are validated (finite, >= 0) by the engine, which names this plugin via label().
  }

  std::string label() const override { return e_->info.label(); }
  const AttentionPlan* attention(std::uint32_t slot) const override {
    if (plans_.empty()) return nullptr;
    return plans_[slot < plans_.size() ? slot : 0].get();
  }
  bool attention_reads_features() const override { return reads_features_; }
  bool per_query() const override { return per_query_; }
  bool shared_baseline() const override { return shared_baseline_; }
  bool all_slots() const override { return all_slots_; }

 private:
  std::string scenario_name(const ReportBatch& b, std::uint32_t slot) const {
    if (!data_scenarios_) return slot < own_.size() ? own_[slot] : "#" + std::to_string(slot);
    if (slot < b.scenarios.size() && b.scenarios[slot] < schema_->scenario_names.size())
      return schema_->scenario_names[b.scenarios[slot]];
    return "#" + std::to_string(slot);
  }

  // Every weight finite and >= 0; a branch-free pass first, the slow search only on failure.
  std::shared_ptr<const Entry> e_;
  const Schema* schema_;
  void* state_ = nullptr;
  std::uint32_t heads_ = 0;
  std::vector<std::string> own_;
  bool data_scenarios_ = false;
  std::vector<std::shared_ptr<const AttentionPlan>> plans_;  // ABI 1.1 attention specs, per own scenario
  bool reads_features_ = false, per_query_ = false, shared_baseline_ = false, all_slots_ = false;
};

}  // namespace

// ---- public API ---------------------------------------------------------------------------

std::string_view to_string(PluginKind kind) noexcept { return kind == PluginKind::scenario ? "scenario" : "weighting"; }

std::string_view to_string(ParamType type) noexcept {
  switch (type) {
    case ParamType::string: return "string";
    case ParamType::integer: return "int";
    case ParamType::real: return "float";
    case ParamType::boolean: return "bool";
  }
  return "?";
}

std::string PluginInfo::label() const {
  return std::string(to_string(kind)) + " plugin '" + name + "' (" + file.string() + ")";
}

PluginRegistry::PluginRegistry() = default;
PluginRegistry::~PluginRegistry() = default;
PluginRegistry::PluginRegistry(PluginRegistry&&) noexcept = default;
PluginRegistry& PluginRegistry::operator=(PluginRegistry&&) noexcept = default;

PluginInfo inspect_plugin(const fs::path& file) { return load_entry(file)->info; }

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
  if (auto b = builtin_plugin_dir(); !b.empty()) out.push_back(b);
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

PluginParams resolve_params(const PluginInfo& plugin, const PluginParams& given) {
  std::map<std::string, std::string> values;
  for (const auto& [k, v] : given) {
    auto it = std::find_if(plugin.params.begin(), plugin.params.end(), [&key = k](const auto& p) { return p.name == key; });
    if (it == plugin.params.end())
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' has no parameter '" + k +
                       "'; valid parameters: " + param_list(plugin));
    auto c = canonical_value(it->type, v);
    if (!c)
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "': parameter '" + k +
                       "' expects " + type_help(it->type) + ", got '" + v + "'");
    values[k] = *c;
  }
  PluginParams out;
  for (const auto& p : plugin.params) {
    auto it = values.find(p.name);
    if (it != values.end()) {
      out.emplace_back(p.name, it->second);
    } else if (p.default_value) {
      out.emplace_back(p.name, *p.default_value);
    } else {
      throw UsageError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' needs parameter '" + p.name +
                       "' (-p " + p.name + "=VALUE, " + type_help(p.type) + ")" + (p.help.empty() ? "" : ": " + p.help));
    }
  }
  return out;
}

std::pair<PluginParams, PluginParams> split_params(const std::vector<std::string>& items, const PluginInfo& scenario,
                                                   const PluginInfo& weighting) {
  std::pair<PluginParams, PluginParams> out;
  auto declares = [](const PluginInfo& p, const std::string& k) {
    return std::any_of(p.params.begin(), p.params.end(), [&](const auto& q) { return q.name == k; });
  };
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("-p '" + item + "': expected key=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto dot = key.find('.');
    if (dot != std::string::npos) {
      std::string who = key.substr(0, dot), k = key.substr(dot + 1);
      bool any = false;
      if (who == scenario.name || who == "scenario") out.first.emplace_back(k, value), any = true;
      if (who == weighting.name || who == "weighting") out.second.emplace_back(k, value), any = true;
      if (!any)
        throw UsageError("-p '" + item + "': '" + who + "' is neither the scenario plugin ('" + scenario.name +
                         "') nor the weighting plugin ('" + weighting.name + "')");
      continue;
    }
    bool s = declares(scenario, key), w = declares(weighting, key);
    if (s) out.first.emplace_back(key, value);
    if (w) out.second.emplace_back(key, value);
    if (!s && !w)
      throw UsageError("-p '" + item + "': no parameter '" + key + "'; valid: scenario plugin '" + scenario.name +
                       "': " + param_list(scenario) + "; weighting plugin '" + weighting.name + "': " + param_list(weighting));
  }
  return out;
}

std::unique_ptr<ReportSource> open_scenario_plugin(const PluginRegistry& registry, std::string_view name,
                                                   const PluginParams& params) {
  const auto& info = registry.require(name, PluginKind::scenario);
  auto resolved = resolve_params(info, params);
  return std::make_unique<PluginSource>(registry.entry(name), resolved);
}

std::unique_ptr<Weighting> open_weighting_plugin(const PluginRegistry& registry, std::string_view name,
                                                 const PluginParams& params, const Schema& schema) {
  const auto& info = registry.require(name, PluginKind::weighting);
  auto resolved = resolve_params(info, params);
  return std::make_unique<PluginWeighting>(registry.entry(name), resolved, schema);
}

}  // namespace headsep
