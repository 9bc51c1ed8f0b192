// A scenario plugin as a ReportSource: open, describe (its schema checked before anything is
// copied out), next_chunk for each chunk (checked by check_chunk), random-access chunk counts, close.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headsep/plugin_host.hpp"
#include "host/chunk_check.hpp"
#include "host/chunk_sink.hpp"
#include "host/loader.hpp"
#include "host/params.hpp"
#include "host/text_checks.hpp"
#include "support/in_flight.hpp"

namespace headsep {

namespace {

namespace lim = plugin_limits;
using host::c_params;
using host::check_chunk;
using host::checked_names;
using host::ChunkSink;
using host::ChunkSlot;
using host::Entry;
using host::last_error_of;
using host::LateCalls;
using host::SlotPool;

class PluginSource final : public ReportSource {
 public:
  PluginSource(std::shared_ptr<const Entry> e, const PluginParams& resolved) : e_(std::move(e)) {
    for (const auto& [key, value] : resolved)
      if (key == "path" && !value.empty()) user_file_ = value;
    const auto& d = e_->d;
    auto cp = c_params(resolved);
    headsep_status st = HEADSEP_ERROR;
    std::string thrown;
    state_ = e_->user;  // in-process plugins find their context in *state (NULL for files)
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "open()");
      st = d.open(cp.data(), static_cast<std::uint32_t>(cp.size()), &state_);
    } catch (const std::exception& ex) {
      thrown = ex.what();
    } catch (...) {
      thrown = "unknown";
    }
    if (!thrown.empty()) throw PluginError(e_->info.label() + ": open() let a C++ exception escape: " + thrown);
    if (st == HEADSEP_ERROR_PARAM) throw UsageError(e_->info.label() + ": " + last_error_of(*e_));  // a value refused
    if (st != HEADSEP_OK) throw PluginError(about_data(e_->info.label() + ": open failed: ", last_error_of(*e_)));
    if (!state_) state_ = nullptr;  // a NULL state is allowed (stateless plugins)
    headsep_schema cs{};
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "describe()");
      st = d.describe(state_, &cs);
    } catch (...) {
      st = HEADSEP_ERROR;
    }
    if (st != HEADSEP_OK) {
      std::string msg = last_error_of(*e_);
      support::InFlight in_flight(e_->in_flight.c_str(), "close()");
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
      support::InFlight in_flight(e_->in_flight.c_str(), "close()");
      d.close(state_);
      throw;
    }
  }
  ~PluginSource() override {
    try {
      support::InFlight in_flight(e_->in_flight.c_str(), "close()");
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

  std::uint32_t intern(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<std::uint32_t>(schema_.scenario_names.size()));
    if (inserted) schema_.scenario_names.push_back(name);
    return it->second;
  }

  // One next_chunk call, validated (callbacks by ChunkSink, the whole chunk by check_chunk). False
  // at the end. Thread-safe when the plugin is random access.
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
      support::InFlight in_flight(e_->in_flight.c_str(), "next_chunk()");
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
      throw PluginError(about_data(where + ": next_chunk failed: ", sink.error.empty() ? last_error_of(*e_) : sink.error));
    }
    if (!sink.error.empty()) throw PluginError(where + ": " + sink.error);
    check_chunk(sink, batch, schema_, where);
    batch.source_rows = sink.c.source_rows;
    names = std::move(sink.scenarios);
    return true;
  }

  /// A failure the plugin reports about the file the user gave it (-p path=FILE: its message
  /// starts "FILE:" or "FILE:LINE:") is about that file's data: shown as the plugin wrote it, the
  /// file naming the fault (README, "Errors"), without the chain through the plugin's label.
  std::string about_data(const std::string& chain, const std::string& msg) const {
    if (!user_file_.empty() && msg.size() > user_file_.size() && msg.compare(0, user_file_.size(), user_file_) == 0 &&
        msg[user_file_.size()] == ':')
      return msg;
    return chain + msg;
  }

  std::shared_ptr<const Entry> e_;  // keeps the library loaded
  std::string user_file_;           // the `path` parameter's file, if the plugin declares one
  void* state_ = nullptr;
  Schema schema_;
  std::map<std::string, std::uint32_t> ids_;
  bool random_ = false, ended_ = false;
  std::uint64_t total_ = 0;
  std::uint64_t rows_read_ = 0, next_index_ = 0, emitted_ = 0;
  mutable LateCalls late_;
  mutable SlotPool slots_{late_};
};

}  // namespace

std::unique_ptr<ReportSource> open_scenario_plugin(const PluginRegistry& registry, std::string_view name,
                                                   const PluginParams& params) {
  const auto& info = registry.require(name, PluginKind::scenario);
  auto resolved = resolve_params(info, params);
  return std::make_unique<PluginSource>(registry.entry(name), resolved);
}

}  // namespace headsep
