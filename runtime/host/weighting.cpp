// A weighting plugin as a Weighting: create (given the data's schema), describe_weighting checked
// (heads, scenario names, layout, ABI 1.1 attention specs, ABI 1.2/1.3 flags), weights, destroy.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headsep/plugin_host.hpp"
#include "host/attention_spec.hpp"
#include "host/loader.hpp"
#include "host/params.hpp"
#include "host/text_checks.hpp"
#include "support/in_flight.hpp"

namespace headsep {

namespace {

namespace lim = plugin_limits;
using host::c_params;
using host::checked_names;
using host::Entry;
using host::last_error_of;

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
    state_ = e_->user;  // in-process plugins find their context in *state (NULL for files)
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "create()");
      st = d.create(cp.data(), static_cast<std::uint32_t>(cp.size()), &cs, &state_);
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown exception";
    }
    if (!thrown.empty()) throw PluginError(e_->info.label() + ": create() let a C++ exception escape: " + thrown);
    if (st == HEADSEP_ERROR_PARAM) throw UsageError(e_->info.label() + ": " + last_error_of(*e_));  // a value refused
    if (st != HEADSEP_OK) throw PluginError(e_->info.label() + ": create failed: " + last_error_of(*e_));
    headsep_weighting_info wi{};
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "describe_weighting()");
      st = d.describe_weighting(state_, &wi);
    } catch (...) {
      st = HEADSEP_ERROR;
    }
    auto fail = [&](const std::string& msg) {
      support::InFlight in_flight(e_->in_flight.c_str(), "destroy()");
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
      support::InFlight in_flight(e_->in_flight.c_str(), "destroy()");
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
        support::InFlight in_flight(e_->in_flight.c_str(), "destroy()");
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
      support::InFlight in_flight(e_->in_flight.c_str(), "destroy()");
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
    v.d_model = b.embedding_size() == 0 ? 0u : schema_->d_model;
    v.embeddings = b.embedding_size() == 0 ? nullptr : b.embedding_data();
    v.query_offset = out.layout == WeightBlock::Layout::per_query ? out.query_offset.data() : nullptr;
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "weights()");
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
                        " (reports " + b.report_id(0) + "..): " + last_error_of(*e_));
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

std::unique_ptr<Weighting> open_weighting_plugin(const PluginRegistry& registry, std::string_view name,
                                                 const PluginParams& params, const Schema& schema) {
  const auto& info = registry.require(name, PluginKind::weighting);
  auto resolved = resolve_params(info, params);
  return std::make_unique<PluginWeighting>(registry.entry(name), resolved, schema);
}

}  // namespace headsep
