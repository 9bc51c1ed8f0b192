// The seed-schema CSV as a report source. Rows are buffered one report at a time: a report's
// scenarios must list the same tokens with the same features (they describe one report), and
// consecutive reports with the same scenario list share a batch.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "csv_reader.hpp"
#include "headsep/error.hpp"
#include "headsep/source.hpp"
#include "text_util.hpp"

namespace headsep {
namespace {

struct Row {
  std::string scenario, token;
  std::vector<double> features, weights;  // weights: single, head1..headN
  std::uint64_t line;
};

class CsvSource final : public ReportSource {
 public:
  explicit CsvSource(const CsvSourceOptions& opt)
      : reader_(opt.bytes.data() ? CsvReader(opt.path, opt.bytes) : CsvReader(opt.path)), keep_(opt.reports.begin(), opt.reports.end()) {
    wanted_ = opt.reports;
    if (!reader_.next()) throw InputError(reader_.path(), 0, "", "empty file: no header row");
    std::vector<std::string> header;
    for (std::size_t i = 0; i < reader_.size(); ++i) {
      std::string name(trim(reader_[i]));
      if (find_invalid_utf8(name)) throw InputError(reader_.path(), reader_.line(), "", "header field " + std::to_string(i + 1) + " is not valid UTF-8");
      if (std::find(header.begin(), header.end(), name) != header.end())
        throw InputError(reader_.path(), reader_.line(), name, "duplicate column name");
      header.push_back(std::move(name));
    }
    header_ = header;
    n_fields_ = header.size();
    auto col = [&](const std::string& name) -> std::optional<std::size_t> {
      auto it = std::find(header.begin(), header.end(), name);
      if (it == header.end()) return std::nullopt;
      return static_cast<std::size_t>(it - header.begin());
    };
    auto required = [&](const std::string& name) {
      auto c = col(name);
      if (!c) throw InputError(reader_.path(), reader_.line(), name, "required column is missing from the header");
      return *c;
    };
    schema_.names_scenarios = true;
    c_report_ = required("report_id");
    c_scenario_ = required("scenario");
    c_token_ = required("token");
    for (const auto& f : opt.features) {
      c_features_.push_back(required(f));
      schema_.feature_names.push_back(f);
    }
    if (opt.weights) {
      c_weights_.push_back(required("single_weight"));
      for (std::uint32_t h = 1;; ++h) {
        auto c = col("head" + std::to_string(h) + "_weight");
        if (!c) break;
        c_weights_.push_back(*c);
      }
      if (c_weights_.size() < 2) required("head1_weight");
      // A gap (head1, head3) is almost surely a typo; refuse it rather than drop a head.
      for (std::size_t i = 0; i < header.size(); ++i) {
        const auto& h = header[i];
        if (h.size() > 11 && h.rfind("head", 0) == 0 && h.compare(h.size() - 7, 7, "_weight") == 0 &&
            std::find(c_weights_.begin(), c_weights_.end(), i) == c_weights_.end())
          throw InputError(reader_.path(), reader_.line(), h,
                           "head columns must be numbered head1_weight..headN_weight without gaps; head" +
                               std::to_string(c_weights_.size()) + "_weight is missing");
      }
      schema_.given_heads = static_cast<std::uint32_t>(c_weights_.size() - 1);
    }
    has_row_ = read_row();
  }

  const Schema& schema() const override { return schema_; }
  std::uint64_t rows_read() const override { return rows_; }

  bool next(ReportBatch& batch, std::size_t max_reports) override {
    batch.clear();
    batch.features.resize(c_features_.size());
    batch.first_report = reports_emitted_;
    while (batch.n_reports() < max_reports) {
      if (!pending_ready_ && !collect_report()) break;
      // A new batch starts where the scenario list changes.
      if (batch.n_reports() > 0 && pending_scenarios_ != batch.scenarios) break;
      append_pending(batch);
    }
    if (batch.n_reports() == 0) {
      if (rows_ == 0) throw InputError(reader_.path(), 0, "", "no data rows after the header");
      for (const auto& id : wanted_)
        if (!seen_selected_.count(id)) throw InputError(reader_.path(), 0, "report_id", "report '" + id + "' not found");
      return false;
    }
    reports_emitted_ += batch.n_reports();
    return true;
  }

 private:
  // Reads and validates one data row into row_. False at end of file.
  bool read_row() {
    if (!reader_.next()) return false;
    ++rows_;
    const auto line = reader_.line();
    if (reader_.size() != n_fields_)
      throw InputError(reader_.path(), line, "", "expected " + std::to_string(n_fields_) + " fields as in the header, found " +
                                                     std::to_string(reader_.size()));
    // Assigns into existing strings so their capacity is reused row after row.
    auto text = [&](std::size_t c, std::string& dst) {
      std::string_view v = reader_[c];
      if (auto bad = find_invalid_utf8(v))
        throw InputError(reader_.path(), line, header_[c], "invalid UTF-8 at byte " + std::to_string(*bad + 1) + " of the field");
      dst.assign(v);
    };
    text(c_report_, row_report_);
    if (row_report_.empty()) throw InputError(reader_.path(), line, "report_id", "empty report id");
    if (!keep_.empty() && !keep_.count(row_report_)) return true;  // skipped cheaply, still validated for shape
    text(c_scenario_, row_.scenario);
    if (row_.scenario.empty()) throw InputError(reader_.path(), line, "scenario", "empty scenario name");
    text(c_token_, row_.token);
    auto number = [&](std::size_t c) {
      auto v = parse_finite_double(reader_[c]);
      if (!v)
        throw InputError(reader_.path(), line, header_[c],
                         "'" + std::string(reader_[c]) + "' is not a finite number");
      return *v;
    };
    row_.features.clear();
    for (auto c : c_features_) row_.features.push_back(number(c));
    row_.weights.clear();
    for (auto c : c_weights_) row_.weights.push_back(number(c));
    row_.line = line;
    return true;
  }

  // Gathers all rows of the next selected report into pending_*. False at end of input.
  bool collect_report() {
    for (;;) {
      if (!has_row_) return false;
      if (!keep_.empty() && !keep_.count(row_report_)) {
        has_row_ = read_row();
        continue;
      }
      break;
    }
    const std::string id = row_report_;
    const std::uint64_t first_line = row_.line;
    if (!closed_.insert(std::hash<std::string>{}(id)).second)
      throw InputError(reader_.path(), first_line, "report_id",
                       "rows of report '" + id + "' resume after other reports; keep each report's rows together (sort the file by report_id)");
    if (!keep_.empty()) seen_selected_.insert(id);  // only --report runs need to know what was found
    // Rows are swapped (not copied) into a reused buffer, so steady state allocates nothing.
    std::size_t n_rows = 0;
    while (has_row_ && row_report_ == id) {
      if (n_rows == report_rows_.size()) report_rows_.emplace_back();
      std::swap(report_rows_[n_rows++], row_);
      has_row_ = read_row();
      while (has_row_ && !keep_.empty() && !keep_.count(row_report_)) has_row_ = read_row();
    }
    // Group by scenario in order of first appearance.
    std::vector<std::string>& scen_names = scen_names_;
    auto& groups = groups_;
    scen_names.clear();
    for (auto& g : groups) g.clear();
    for (std::size_t i = 0; i < n_rows; ++i) {
      const Row& r = report_rows_[i];
      auto it = std::find(scen_names.begin(), scen_names.end(), r.scenario);
      if (it == scen_names.end()) {
        scen_names.push_back(r.scenario);
        if (groups.size() < scen_names.size()) groups.emplace_back();
        it = scen_names.end() - 1;
      }
      groups[static_cast<std::size_t>(it - scen_names.begin())].push_back(&r);
    }
    groups.resize(scen_names.size());
    const auto& first = groups[0];
    for (std::size_t s = 1; s < groups.size(); ++s) {
      const auto& g = groups[s];
      if (g.size() != first.size())
        throw InputError(reader_.path(), g.back()->line, "token",
                         "report '" + id + "': scenario '" + scen_names[s] + "' has " + std::to_string(g.size()) +
                             " tokens but scenario '" + scen_names[0] + "' has " + std::to_string(first.size()) +
                             "; every scenario of a report must list the same tokens");
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (g[k]->token != first[k]->token)
          throw InputError(reader_.path(), g[k]->line, "token",
                           "report '" + id + "': scenario '" + scen_names[s] + "' has token '" + g[k]->token +
                               "' where scenario '" + scen_names[0] + "' has '" + first[k]->token + "'");
        for (std::size_t f = 0; f < c_features_.size(); ++f)
          if (g[k]->features[f] != first[k]->features[f])
            throw InputError(reader_.path(), g[k]->line, schema_.feature_names[f],
                             "report '" + id + "', token '" + g[k]->token + "': value differs from scenario '" +
                                 scen_names[0] + "' (line " + std::to_string(first[k]->line) + "); features describe the token, not the scenario");
      }
    }
    pending_scenarios_.clear();
    for (const auto& name : scen_names) pending_scenarios_.push_back(scenario_index(name));
    pending_id_ = id;
    pending_rows_ = n_rows;
    pending_ready_ = true;
    return true;
  }

  std::uint32_t scenario_index(const std::string& name) {
    auto [it, inserted] = scenario_ids_.try_emplace(name, static_cast<std::uint32_t>(schema_.scenario_names.size()));
    if (inserted) schema_.scenario_names.push_back(name);
    return it->second;
  }

  void append_pending(ReportBatch& b) {
    const auto& tokens = groups_[0];
    if (b.n_reports() == 0) {
      b.scenarios = pending_scenarios_;
      b.given_weights.assign(pending_scenarios_.size() * c_weights_.size(), {});
    }
    b.report_ids.push_back(pending_id_);
    for (const Row* r : tokens) {
      b.token_names.push_back(r->token);
      for (std::size_t f = 0; f < c_features_.size(); ++f) b.features[f].push_back(r->features[f]);
    }
    for (std::size_t j = 0; j < groups_.size(); ++j)
      for (const Row* r : groups_[j])
        for (std::size_t h = 0; h < c_weights_.size(); ++h) b.given_weights[j * c_weights_.size() + h].push_back(r->weights[h]);
    b.token_offset.push_back(b.token_offset.back() + tokens.size());
    b.source_rows += pending_rows_;
    pending_ready_ = false;
  }

  CsvReader reader_;
  std::unordered_set<std::string> keep_;
  std::vector<std::string> wanted_;
  std::unordered_set<std::string> seen_selected_;
  std::vector<std::string> header_;
  std::size_t n_fields_ = 0, c_report_ = 0, c_scenario_ = 0, c_token_ = 0;
  std::vector<std::size_t> c_features_, c_weights_;
  Schema schema_;
  std::unordered_map<std::string, std::uint32_t> scenario_ids_;
  std::unordered_set<std::size_t> closed_;  // hashes of report ids already emitted
  std::uint64_t rows_ = 0, reports_emitted_ = 0;
  bool has_row_ = false;
  std::string row_report_;
  Row row_;
  bool pending_ready_ = false;
  std::string pending_id_;
  std::uint64_t pending_rows_ = 0;
  std::vector<std::uint32_t> pending_scenarios_;
  std::vector<Row> report_rows_;                // the pending report's rows (reused)
  std::vector<std::string> scen_names_;         // its scenarios, in order of first appearance
  std::vector<std::vector<const Row*>> groups_; // its rows per scenario
};

class TableWeighting final : public Weighting {
 public:
  explicit TableWeighting(std::uint32_t heads) : heads_(heads) {}
  std::uint32_t heads() const override { return heads_; }
  void weights(const ReportBatch& b, std::uint32_t slot, WeightBlock& out) const override {
    if (b.given_weights.empty()) throw Error("weighting 'table': the input carries no weight columns");
    for (std::uint32_t h = 0; h <= heads_; ++h) out.rows[h] = b.given_weights[slot * (heads_ + 1) + h];
  }

 private:
  std::uint32_t heads_;
};

}  // namespace

std::unique_ptr<ReportSource> open_csv_source(const CsvSourceOptions& options) {
  return std::make_unique<CsvSource>(options);
}

std::unique_ptr<Weighting> make_table_weighting(std::uint32_t heads) { return std::make_unique<TableWeighting>(heads); }

}  // namespace headsep
