// headsep — header-only C++ SDK for plugin authors, over the C ABI of plugin.h.
//
// Write a class, one parameter table and one macro:
//
//   #include <headsep/plugin_sdk.hpp>
//   class Hello : public headsep::sdk::ScenarioGenerator {
//    public:
//     explicit Hello(const headsep::sdk::Params& p) : n_(p.get_int("reports")) {}
//     headsep::sdk::SchemaInfo schema() const override { return {{"decision_axis"}}; }
//     bool chunk(std::uint64_t index, std::uint64_t max, headsep::sdk::ChunkWriter& out) override {
//       ...; return true;   // false = no report left
//     }
//   };
//   static constexpr headsep_param_spec kParams[] = {{"reports", HEADSEP_PARAM_INT, "10", "how many"}};
//   HEADSEP_SCENARIO_PLUGIN(Hello, "hello", "1.0.0", "Says hello", kParams)
//
// Every exception thrown by your code is caught at the boundary and becomes HEADSEP_ERROR with
// its what() as the message. Build with -fvisibility=hidden (headsep::plugin_sdk sets it):
// only headsep_plugin_entry is exported.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/plugin.h"

namespace headsep::sdk {

/// Thrown by SDK helpers and by plugins to report an error; any std::exception works as well.
class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A parameter value the plugin refuses (open/create): the host reports a usage error (exit 2).
class ParamError : public PluginError {
 public:
  using PluginError::PluginError;
};

namespace detail {
// Trivially destructible thread-local buffer: no TLS destructor keeps the library pinned.
inline char* error_buffer() {
  static thread_local char buf[2048];
  return buf;
}
inline void set_error(const char* what) noexcept {
  std::snprintf(error_buffer(), 2048, "%s", what ? what : "unknown error");
}
inline const char* last_error() noexcept { return error_buffer(); }

// Runs f, turning every exception into HEADSEP_ERROR + message.
template <class F>
headsep_status guard(F&& f) noexcept {
  try {
    return f();
  } catch (const ParamError& e) {
    set_error(e.what());
    return HEADSEP_ERROR_PARAM;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception (not derived from std::exception)");
  }
  return HEADSEP_ERROR;
}
}  // namespace detail

/// The validated parameters handed to a plugin (every declared one, defaults filled in).
class Params {
 public:
  Params(const headsep_param* p, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) items_.emplace_back(p[i].name, p[i].value ? p[i].value : "");
  }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const std::string& get_string(std::string_view name) const {
    if (auto* v = find(name)) return *v;
    throw PluginError("parameter '" + std::string(name) + "' was not passed");
  }
  std::int64_t get_int(std::string_view name) const {
    const auto& s = get_string(name);
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) throw ParamError("parameter '" + std::string(name) + "': '" + s + "' is not an integer");
    return v;
  }
  double get_double(std::string_view name) const {
    const auto& s = get_string(name);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) throw ParamError("parameter '" + std::string(name) + "': '" + s + "' is not a number");
    return v;
  }
  bool get_bool(std::string_view name) const { return get_string(name) == "true"; }
  /// A comma-separated list; empty string = empty list. Items are trimmed of spaces.
  std::vector<std::string> get_list(std::string_view name) const {
    std::vector<std::string> out;
    const auto& s = get_string(name);
    std::size_t i = 0;
    while (i <= s.size() && !s.empty()) {
      std::size_t j = s.find(',', i);
      if (j == std::string::npos) j = s.size();
      std::string item = s.substr(i, j - i);
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (!item.empty()) out.push_back(item);
      i = j + 1;
    }
    return out;
  }

 private:
  const std::string* find(std::string_view name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string, std::string>> items_;
};

/// What a scenario generator produces (see headsep_schema).
struct SchemaInfo {
  std::vector<std::string> features;   ///< feature column names
  std::vector<std::string> scenarios;  ///< scenarios known up front (all of them if random_access)
  std::uint32_t given_heads = 0;       ///< N when chunks carry given weights
  bool names_scenarios = false;        ///< chunks name their scenarios (ChunkWriter::scenario)
  bool random_access = false;          ///< chunk() may run concurrently for distinct indices
  std::uint64_t total_reports = 0;     ///< number of reports when known in advance, else 0
  std::uint32_t d_model = 0;           ///< ABI 1.1: width of the embeddings every chunk carries, 0 = none
};

/// Writes one chunk into host-owned memory (valid during chunk() only, not zeroed: write all).
class ChunkWriter {
 public:
  explicit ChunkWriter(headsep_chunk_out* out) : out_(out) {}
  /// n_reports + 1 offsets; set [0] = 0 and the running token count after each report.
  std::span<std::uint64_t> token_offsets(std::uint64_t n_reports) {
    return {check(out_->token_offsets(out_, n_reports), "token_offsets"), static_cast<std::size_t>(n_reports + 1)};
  }
  std::span<double> feature(std::uint32_t f, std::uint64_t n_tokens) {
    return {check(out_->feature(out_, f, n_tokens), "feature"), static_cast<std::size_t>(n_tokens)};
  }
  std::span<double> given_weights(std::uint32_t slot, std::uint32_t row, std::uint64_t n_tokens) {
    return {check(out_->given_weights(out_, slot, row, n_tokens), "given_weights"), static_cast<std::size_t>(n_tokens)};
  }
  void scenario(std::string_view name) { status(out_->scenario(out_, name.data(), name.size()), "scenario"); }
  void report_id(std::string_view id) { status(out_->report_id(out_, id.data(), id.size()), "report_id"); }
  void token_name(std::string_view name) { status(out_->token_name(out_, name.data(), name.size()), "token_name"); }
  /// ABI 1.1: the chunk's token embeddings, n_tokens x d_model floats, row-major [token][d_model].
  std::span<float> embeddings(std::uint64_t n_tokens, std::uint32_t d_model) {
    if (out_->struct_size < offsetof(headsep_chunk_out, embeddings) + sizeof(void*) || !out_->embeddings)
      throw PluginError("this headsep host predates embeddings (plugin ABI 1.1)");
    return {check(out_->embeddings(out_, n_tokens), "embeddings"), static_cast<std::size_t>(n_tokens * d_model)};
  }
  void source_rows(std::uint64_t n) { out_->source_rows = n; }
  void rows_read(std::uint64_t n) { out_->rows_read = n; }
  headsep_chunk_out* raw() const noexcept { return out_; }

 private:
  template <class T>
  static T* check(T* p, const char* what) {
    if (!p) throw PluginError(std::string("host refused ") + what + "() (bad index or size)");
    return p;
  }
  static void status(int32_t s, const char* what) {
    if (s != 0) throw PluginError(std::string("host refused ") + what + "()");
  }
  headsep_chunk_out* out_;
};

/// Base class of a scenario generator. Constructor: explicit T(const Params&).
class ScenarioGenerator {
 public:
  virtual ~ScenarioGenerator() = default;
  virtual SchemaInfo schema() const = 0;
  /// Writes chunk `index` (at most max_reports reports); returns false when no report is left.
  /// With SchemaInfo::random_access, called from several threads at once: do not modify *this.
  virtual bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) = 0;
};

/// Read-only view of a chunk, for weighting schemes.
class BatchView {
 public:
  explicit BatchView(const headsep_batch_view* b) : b_(b) {}
  std::uint64_t first_report() const noexcept { return b_->first_report; }
  std::size_t n_reports() const noexcept { return static_cast<std::size_t>(b_->n_reports); }
  std::size_t n_tokens() const noexcept { return static_cast<std::size_t>(b_->n_tokens); }
  std::span<const std::uint64_t> token_offset() const noexcept { return {b_->token_offset, n_reports() + 1}; }
  std::span<const double> feature(std::uint32_t f) const {
    if (f >= b_->n_features) throw PluginError("feature index out of range");
    return {b_->features[f], n_tokens()};
  }
  std::uint32_t n_scenarios() const noexcept { return b_->n_scenarios; }
  /// ABI 1.1: the embeddings ([token][d_model]); empty when the data has none.
  std::uint32_t d_model() const noexcept { return has_1_1() ? b_->d_model : 0; }
  std::span<const float> embeddings() const noexcept {
    return d_model() && b_->embeddings ? std::span<const float>(b_->embeddings, n_tokens() * d_model()) : std::span<const float>();
  }
  /// ABI 1.1, per-query layout: report r's n x n block starts at query_offset()[r] in every row.
  std::span<const std::uint64_t> query_offset() const noexcept {
    return has_1_1() && b_->query_offset ? std::span<const std::uint64_t>(b_->query_offset, n_reports() + 1)
                                         : std::span<const std::uint64_t>();
  }
  /// Given weight row `row` (0 = single) of data scenario slot `slot`; needs given_heads.
  std::span<const double> given_weights(std::uint32_t slot, std::uint32_t row, std::uint32_t given_heads) const {
    std::uint64_t i = std::uint64_t(slot) * (given_heads + 1) + row;
    if (i >= b_->n_given_rows) throw PluginError("the chunk carries no given weights for this scenario/row");
    return {b_->given_weights[i], n_tokens()};
  }
  const headsep_batch_view* raw() const noexcept { return b_; }

 private:
  bool has_1_1() const noexcept { return b_->struct_size >= offsetof(headsep_batch_view, query_offset) + sizeof(void*); }
  const headsep_batch_view* b_;
};

/// The schema a weighting scheme is created against.
struct SchemaView {
  std::vector<std::string> features, scenarios;
  std::uint32_t given_heads = 0;
  bool names_scenarios = false;
  std::uint32_t d_model = 0;  ///< ABI 1.1: embedding width, 0 = none
  explicit SchemaView(const headsep_schema* s) {
    if (s->struct_size >= offsetof(headsep_schema, d_model) + sizeof(std::uint32_t)) d_model = s->d_model;
    for (std::uint32_t i = 0; i < s->n_features; ++i) features.emplace_back(s->feature_names[i]);
    for (std::uint32_t i = 0; i < s->n_scenarios; ++i) scenarios.emplace_back(s->scenario_names[i]);
    given_heads = s->given_heads;
    names_scenarios = (s->flags & HEADSEP_SCHEMA_NAMES_SCENARIOS) != 0;
  }
  /// Index of a feature column; throws naming the missing column and the available ones.
  std::uint32_t feature_index(std::string_view name) const {
    for (std::size_t i = 0; i < features.size(); ++i)
      if (features[i] == name) return static_cast<std::uint32_t>(i);
    std::string have;
    for (const auto& f : features) have += (have.empty() ? "" : ", ") + f;
    throw PluginError("feature column '" + std::string(name) + "' not in the data (available: " + have + ")");
  }
};

/// Base class of a weighting scheme. Constructor: T(const Params&, const SchemaView&).
class WeightingScheme {
 public:
  virtual ~WeightingScheme() = default;
  virtual std::uint32_t heads() const = 0;
  /// The scheme's own scenarios (head designs); empty = evaluate the data's scenarios.
  virtual std::vector<std::string> scenarios() const { return {}; }
  /// rows[0..heads], each n_tokens doubles (per-query layout: batch.query_offset()'s blocks);
  /// rows[0] is nullptr for slot > 0 when shared_baseline() is true.
  /// CALLED FROM SEVERAL THREADS AT ONCE: const, no mutation. Not called for attention schemes.
  virtual void weights(const BatchView& batch, std::uint32_t slot, double* const* rows) const = 0;
  /// ABI 1.1: HEADSEP_LAYOUT_PER_TOKEN, or HEADSEP_LAYOUT_PER_QUERY for explicit attention maps.
  virtual std::uint32_t layout() const { return HEADSEP_LAYOUT_PER_TOKEN; }
  /// ABI 1.1: QKV attention schemes, one per scenario (max(1, scenarios().size())); empty = none.
  /// Pointers inside must stay valid as long as the object lives.
  virtual std::vector<headsep_attention_spec> attention() const { return {}; }
  /// ABI 1.2: true when the baseline (rows[0]) does not depend on the slot
  /// (HEADSEP_WEIGHTING_SHARED_BASELINE): weights() then gets rows[0] == nullptr for slot > 0.
  virtual bool shared_baseline() const { return false; }
  /// ABI 1.3: true when weights() also takes slot == HEADSEP_SLOT_ALL (HEADSEP_WEIGHTING_ALL_SLOTS):
  /// rows then holds slots x (heads + 1) pointers, slot-major, and one call fills every slot.
  virtual bool all_slots() const { return false; }
};

namespace detail {

template <class T>
struct ScenarioHolder {
  T obj;
  SchemaInfo info;
  std::vector<const char*> features, scenarios;
  headsep_schema schema{};
  explicit ScenarioHolder(const Params& p) : obj(p) {}
};

template <class T>
struct ScenarioAdapter {
  static headsep_status open(const headsep_param* p, std::uint32_t n, void** state) {
    return guard([&] {
      *state = nullptr;
      Params params(p, n);
      *state = new ScenarioHolder<T>(params);
      return HEADSEP_OK;
    });
  }
  static headsep_status describe(void* state, headsep_schema* out) {
    return guard([&] {
      auto* h = static_cast<ScenarioHolder<T>*>(state);
      h->info = h->obj.schema();
      h->features.clear();
      h->scenarios.clear();
      for (const auto& f : h->info.features) h->features.push_back(f.c_str());
      for (const auto& s : h->info.scenarios) h->scenarios.push_back(s.c_str());
      h->schema = headsep_schema{};
      h->schema.struct_size = sizeof(headsep_schema);
      h->schema.flags = (h->info.names_scenarios ? HEADSEP_SCHEMA_NAMES_SCENARIOS : 0u) |
                        (h->info.random_access ? HEADSEP_SCHEMA_RANDOM_ACCESS : 0u);
      h->schema.n_features = static_cast<std::uint32_t>(h->features.size());
      h->schema.feature_names = h->features.data();
      h->schema.n_scenarios = static_cast<std::uint32_t>(h->scenarios.size());
      h->schema.scenario_names = h->scenarios.data();
      h->schema.given_heads = h->info.given_heads;
      h->schema.total_reports = h->info.total_reports;
      h->schema.d_model = h->info.d_model;
      *out = h->schema;
      return HEADSEP_OK;
    });
  }
  static headsep_status next_chunk(void* state, std::uint64_t index, std::uint64_t max_reports, headsep_chunk_out* out) {
    return guard([&] {
      ChunkWriter w(out);
      return static_cast<ScenarioHolder<T>*>(state)->obj.chunk(index, max_reports, w) ? HEADSEP_OK : HEADSEP_END;
    });
  }
  static void close(void* state) noexcept {
    try {
      delete static_cast<ScenarioHolder<T>*>(state);
    } catch (...) {
    }
  }
};

template <class T>
struct WeightingHolder {
  T obj;
  std::vector<std::string> names;
  std::vector<const char*> ptrs;
  std::vector<headsep_attention_spec> attention;
  WeightingHolder(const Params& p, const SchemaView& s) : obj(p, s) {}
};

template <class T>
struct WeightingAdapter {
  static headsep_status create(const headsep_param* p, std::uint32_t n, const headsep_schema* schema, void** state) {
    return guard([&] {
      *state = nullptr;
      Params params(p, n);
      SchemaView sv(schema);
      *state = new WeightingHolder<T>(params, sv);
      return HEADSEP_OK;
    });
  }
  static headsep_status describe(void* state, headsep_weighting_info* info) {
    return guard([&] {
      auto* h = static_cast<WeightingHolder<T>*>(state);
      h->names = h->obj.scenarios();
      h->ptrs.clear();
      for (const auto& s : h->names) h->ptrs.push_back(s.c_str());
      *info = headsep_weighting_info{};
      info->struct_size = sizeof(headsep_weighting_info);
      info->heads = h->obj.heads();
      info->layout = h->obj.layout();
      info->n_scenarios = static_cast<std::uint32_t>(h->ptrs.size());
      info->scenario_names = h->ptrs.data();
      h->attention = h->obj.attention();
      for (auto& a : h->attention) a.struct_size = sizeof(headsep_attention_spec);
      if (!h->attention.empty() && h->attention.size() != std::max<std::size_t>(1, h->names.size()))
        throw PluginError("attention(): one spec per scenario expected");
      info->attention = h->attention.empty() ? nullptr : h->attention.data();
      info->flags = (h->obj.shared_baseline() ? HEADSEP_WEIGHTING_SHARED_BASELINE : 0u) |
                    (h->obj.all_slots() ? HEADSEP_WEIGHTING_ALL_SLOTS : 0u);
      return HEADSEP_OK;
    });
  }
  static headsep_status weights(const void* state, const headsep_batch_view* b, std::uint32_t slot, double* const* rows) {
    return guard([&] {
      static_cast<const WeightingHolder<T>*>(state)->obj.weights(BatchView(b), slot, rows);
      return HEADSEP_OK;
    });
  }
  static void destroy(void* state) noexcept {
    try {
      delete static_cast<WeightingHolder<T>*>(state);
    } catch (...) {
    }
  }
};

template <std::size_t N>
constexpr std::uint32_t count(const headsep_param_spec (&)[N]) noexcept { return N; }
template <std::size_t N>
constexpr const headsep_param_spec* first(const headsep_param_spec (&a)[N]) noexcept { return a; }
// A plugin without parameters passes nullptr as PARAMS.
constexpr std::uint32_t count(std::nullptr_t) noexcept { return 0; }
constexpr const headsep_param_spec* first(std::nullptr_t) noexcept { return nullptr; }

inline headsep_plugin_descriptor base_descriptor(std::uint32_t kind, const char* name, const char* version,
                                                 const char* description, std::uint32_t n_params,
                                                 const headsep_param_spec* params) {
  headsep_plugin_descriptor d{};
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof(headsep_plugin_descriptor);
  d.kind = kind;
  d.name = name;
  d.version = version;
  d.description = description;
  d.n_params = n_params;
  d.params = params;
  d.last_error = &detail::last_error;
  return d;
}

template <class T>
headsep_plugin_descriptor scenario_descriptor(const char* name, const char* version, const char* description,
                                              std::uint32_t n_params, const headsep_param_spec* params) {
  auto d = base_descriptor(HEADSEP_KIND_SCENARIO, name, version, description, n_params, params);
  d.open = &ScenarioAdapter<T>::open;
  d.describe = &ScenarioAdapter<T>::describe;
  d.next_chunk = &ScenarioAdapter<T>::next_chunk;
  d.close = &ScenarioAdapter<T>::close;
  return d;
}

template <class T>
headsep_plugin_descriptor weighting_descriptor(const char* name, const char* version, const char* description,
                                               std::uint32_t n_params, const headsep_param_spec* params) {
  auto d = base_descriptor(HEADSEP_KIND_WEIGHTING, name, version, description, n_params, params);
  d.create = &WeightingAdapter<T>::create;
  d.describe_weighting = &WeightingAdapter<T>::describe;
  d.weights = &WeightingAdapter<T>::weights;
  d.destroy = &WeightingAdapter<T>::destroy;
  return d;
}

}  // namespace detail
}  // namespace headsep::sdk

/// Exports scenario generator CLASS. PARAMS: a headsep_param_spec array (static storage) or nullptr.
#define HEADSEP_SCENARIO_PLUGIN(CLASS, NAME, VERSION, DESCRIPTION, PARAMS)                                  \
  extern "C" HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {           \
    static const headsep_plugin_descriptor d = ::headsep::sdk::detail::scenario_descriptor<CLASS>(         \
        NAME, VERSION, DESCRIPTION, ::headsep::sdk::detail::count(PARAMS), ::headsep::sdk::detail::first(PARAMS)); \
    return &d;                                                                                              \
  }

/// Exports weighting scheme CLASS. PARAMS: a headsep_param_spec array (static storage) or nullptr.
#define HEADSEP_WEIGHTING_PLUGIN(CLASS, NAME, VERSION, DESCRIPTION, PARAMS)                                 \
  extern "C" HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {           \
    static const headsep_plugin_descriptor d = ::headsep::sdk::detail::weighting_descriptor<CLASS>(        \
        NAME, VERSION, DESCRIPTION, ::headsep::sdk::detail::count(PARAMS), ::headsep::sdk::detail::first(PARAMS)); \
    return &d;                                                                                              \
  }
