// The seed-schema CSV as a report source. Rows are buffered one report at a time: a report's
// scenarios must list the same tokens with the same features (they describe one report), and
// consecutive reports with the same scenario list share a batch.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "io/csv_reader.hpp"
#include "headsep/error.hpp"
#include "headsep/plugin_host.hpp"
#include "headsep/source.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

// Reports already emitted, so that a report whose rows resume after other reports is refused
// (it would be emitted twice), in memory that does not grow with the input (docs/LIMITS.md):
//  - the most recent reports (up to kRecent) sit in an open-addressing table of (id hash, first
//    line): a report resuming among them is refused at once, by name;
//  - a full table is sorted and spilled as one run to an unlinked temporary file under TMPDIR
//    (16 bytes per report on disk; nothing is left behind, even on a kill);
//  - at the end of the input the runs are merged and a repeated hash is a resumed report, named
//    by its two lines. More than kMaxRuns runs are first merged into one.
// Ids are compared by 64-bit hash (as std::hash gives): two different ids collide with
// probability about n^2 / 2^65, 1e-5 for 20 M reports.
class SeenReports {
 public:
  struct Entry {
    std::uint64_t hash = 0, line = 0;  // hash 0 marks an empty slot (a real 0 is stored as 1)
    bool operator<(const Entry& o) const noexcept { return hash != o.hash ? hash < o.hash : line < o.line; }
  };
  SeenReports() = default;
  SeenReports(const SeenReports&) = delete;
  SeenReports& operator=(const SeenReports&) = delete;
  ~SeenReports() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// Records a report starting at `line`; returns the line where it started before if it is
  /// among the recent reports, else 0.
  std::uint64_t insert(std::uint64_t hash, std::uint64_t line) {
    hash = hash ? hash : 1;
    if (2 * (count_ + 1) > slots_.size()) {
      if (slots_.size() < 2 * kRecent) grow();
      else spill();
    }
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      if (slots_[i].hash == hash) return slots_[i].line;
      if (slots_[i].hash == 0) {
        slots_[i] = {hash, line};
        ++count_;
        return 0;
      }
    }
  }

  /// After the last report: the (first, resumed) lines of a report seen twice, or {0, 0}.
  std::pair<std::uint64_t, std::uint64_t> check_all() {
    if (runs_.empty()) return {0, 0};  // the table alone holds distinct hashes
    spill();
    return merge(nullptr);
  }

 private:
  static constexpr std::size_t kRecent = std::size_t(1) << 20;  // table: 2^21 slots, 32 MiB
  static constexpr std::size_t kMaxRuns = 64;                   // merge buffers: 64 x 64 KiB
  static constexpr std::size_t kBuffer = 4096;                  // entries read at once per run
  struct Run {
    std::uint64_t offset = 0, count = 0;
  };

  void grow() {
    std::vector<Entry> old(std::max<std::size_t>(1024, 2 * slots_.size()));
    old.swap(slots_);
    count_ = 0;
    for (const Entry& e : old)
      if (e.hash) insert(e.hash, e.line);
  }

  [[noreturn]] static void io_error(const char* what) {
    throw Error(std::string("report-id check: cannot ") + what + " its temporary file in " +
                std::filesystem::temp_directory_path().string() + ": " + std::strerror(errno) + " (set TMPDIR)");
  }

  static int open_temporary() {
    std::string path = (std::filesystem::temp_directory_path() / "headsep-ids-XXXXXX").string();
    const int fd = ::mkstemp(path.data());
    if (fd < 0) io_error("create");
    ::unlink(path.c_str());  // gone from the folder at once; freed when closed
    return fd;
  }

  static void write_all(int fd, std::uint64_t offset, const void* data, std::size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes) {
      const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) io_error("write");
      p += n, offset += std::uint64_t(n), bytes -= std::size_t(n);
    }
  }

  // The table, sorted, becomes one more run; the table is emptied.
  void spill() {
    std::size_t n = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].hash) slots_[n++] = slots_[i];
    std::sort(slots_.begin(), slots_.begin() + std::ptrdiff_t(n));
    if (fd_ < 0) fd_ = open_temporary();
    write_all(fd_, end_, slots_.data(), n * sizeof(Entry));
    runs_.push_back({end_, n});
    end_ += n * sizeof(Entry);
    std::fill(slots_.begin(), slots_.end(), Entry{});
    count_ = 0;
    if (runs_.size() >= kMaxRuns) compact();
  }

  // Merges every run (k-way, kBuffer entries per run in memory). Writes the merged run to `out`
  // when given; returns the lines of the first repeated hash, or {0, 0}.
  std::pair<std::uint64_t, std::uint64_t> merge(int* out) {
    struct Cursor {
      Run run;
      std::vector<Entry> buf;
      std::size_t pos = 0;
    };
    std::vector<Cursor> cur(runs_.size());
    auto refill = [&](Cursor& c) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBuffer, c.run.count));
      c.buf.resize(n);
      c.pos = 0;
      std::size_t got = 0;
      while (got < n * sizeof(Entry)) {
        const ssize_t r = ::pread(fd_, reinterpret_cast<char*>(c.buf.data()) + got, n * sizeof(Entry) - got,
                                  static_cast<off_t>(c.run.offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) io_error("read");
        got += std::size_t(r);
      }
      c.run.offset += n * sizeof(Entry);
      c.run.count -= n;
      return n > 0;
    };
    auto later = [&](std::size_t a, std::size_t b) { return cur[b].buf[cur[b].pos] < cur[a].buf[cur[a].pos]; };
    std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> heap(later);
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      cur[i].run = runs_[i];
      if (refill(cur[i])) heap.push(i);
    }
    std::vector<Entry> merged;
    std::uint64_t out_end = 0;
    Entry prev;
    while (!heap.empty()) {
      const std::size_t i = heap.top();
      heap.pop();
      const Entry e = cur[i].buf[cur[i].pos++];
      if (prev.hash == e.hash) return {prev.line, e.line};  // the smaller line sorts first
      prev = e;
      if (out) {
        merged.push_back(e);
        if (merged.size() == kBuffer) {
          write_all(*out, out_end, merged.data(), merged.size() * sizeof(Entry));
          out_end += merged.size() * sizeof(Entry);
          merged.clear();
        }
      }
      if (cur[i].pos < cur[i].buf.size() || refill(cur[i])) heap.push(i);
    }
    if (out) write_all(*out, out_end, merged.data(), merged.size() * sizeof(Entry));
    return {0, 0};
  }

  // Too many runs: merge them into one run in a fresh file (checking for repeats on the way).
  void compact() {
    std::uint64_t total = 0;
    for (const Run& r : runs_) total += r.count;
    int fd = open_temporary();
    std::pair<std::uint64_t, std::uint64_t> repeat;
    try {
      repeat = merge(&fd);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (repeat.first) {  // the caller refuses the input now; the merged file is incomplete
      ::close(fd);
      repeat_ = repeat;
      return;
    }
    ::close(fd_);
    fd_ = fd;
    runs_.assign(1, Run{0, total});
    end_ = total * sizeof(Entry);
  }

 public:
  /// A repeat found while compacting in the middle of the input ({0, 0}: none).
  std::pair<std::uint64_t, std::uint64_t> repeat_{0, 0};

 private:
  std::vector<Entry> slots_;
  std::size_t count_ = 0;
  int fd_ = -1;
  std::uint64_t end_ = 0;
  std::vector<Run> runs_;
};

struct Row {
  std::string scenario, token;
  std::vector<double> features, weights;  // weights: single, head1..headN
  std::uint64_t line;
};

// The pending report's rows, flat: one array per field, reused report after report. About
// 40 + 8 x (features + weights) bytes per row plus the token's bytes (a struct of strings and
// vectors per row took ~190), so one report's memory is linear with a small constant.
struct PendingRows {
  std::string tokens;                    // token names, concatenated
  std::vector<std::size_t> token_end;    // per row
  std::vector<std::uint32_t> scenario;   // per row: index into the report's scenario list
  std::vector<double> values;            // per row: features, then weights
  std::vector<std::uint64_t> line;       // per row

  std::size_t size() const noexcept { return line.size(); }
  void clear() noexcept {
    tokens.clear(), token_end.clear(), scenario.clear(), values.clear(), line.clear();
  }
  void push(const Row& r, std::uint32_t scen) {
    tokens += r.token;
    token_end.push_back(tokens.size());
    scenario.push_back(scen);
    values.insert(values.end(), r.features.begin(), r.features.end());
    values.insert(values.end(), r.weights.begin(), r.weights.end());
    line.push_back(r.line);
  }
  std::string_view token(std::size_t i) const noexcept {
    const std::size_t b = i ? token_end[i - 1] : 0;
    return std::string_view(tokens).substr(b, token_end[i] - b);
  }
  const double* row_values(std::size_t i, std::size_t per_row) const noexcept { return values.data() + i * per_row; }
};

class CsvSource final : public ReportSource {
 public:
  static constexpr std::size_t kBatchTokens = std::size_t(1) << 20;   // a batch ends here (docs/LIMITS.md)
  static constexpr std::size_t kMaxReportRows = std::size_t(1) << 22;  // rows of one report

  explicit CsvSource(const CsvSourceOptions& opt)
      : reader_(opt.bytes.data() ? CsvReader(opt.path, opt.bytes) : CsvReader(opt.path)), keep_(opt.reports.begin(), opt.reports.end()) {
    wanted_ = opt.reports;
    if (!reader_.next()) throw InputError(reader_.path(), 0, "", "empty file: no header row");
    // Column lookups go through a hash map: a header of tens of thousands of columns costs
    // linear time, not quadratic (docs/LIMITS.md).
    std::vector<std::string> header;
    std::unordered_map<std::string_view, std::size_t> where;
    header.reserve(reader_.size());
    for (std::size_t i = 0; i < reader_.size(); ++i) {
      std::string name(trim(reader_[i]));
      if (find_invalid_utf8(name)) throw InputError(reader_.path(), reader_.line(), "", "header field " + std::to_string(i + 1) + " is not valid UTF-8");
      header.push_back(std::move(name));
    }
    for (std::size_t i = 0; i < header.size(); ++i)
      if (!where.emplace(header[i], i).second) throw InputError(reader_.path(), reader_.line(), header[i], "duplicate column name");
    n_fields_ = header.size();
    auto col = [&](const std::string& name) -> std::optional<std::size_t> {
      auto it = where.find(name);
      if (it == where.end()) return std::nullopt;
      return it->second;
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
    // Feature columns in the file's order, whatever order they were asked in (--axes,
    // csv.features): that order is X's for attention schemes reading features (docs/ATTENTION.md).
    std::vector<std::pair<std::size_t, std::string>> feats;
    for (const auto& f : opt.features) {
      for (const auto& [c, name] : feats)
        if (name == f) throw Error(reader_.path() + ": feature column '" + f + "' is asked for twice (csv.features)");
      feats.emplace_back(required(f), f);
    }
    std::sort(feats.begin(), feats.end());
    for (auto& [c, name] : feats) {
      c_features_.push_back(c);
      schema_.feature_names.push_back(std::move(name));
    }
    if (opt.weights) {
      c_weights_.push_back(required("single_weight"));
      // Heads are bounded as for plugins: pairwise separations grow as heads^2 per report.
      for (std::uint32_t h = 1;; ++h) {
        auto c = col("head" + std::to_string(h) + "_weight");
        if (!c) break;
        if (h > plugin_limits::max_heads)
          throw InputError(reader_.path(), reader_.line(), header[*c],
                           "more than " + std::to_string(plugin_limits::max_heads) +
                               " head columns; at most " + std::to_string(plugin_limits::max_heads) +
                               " heads are supported (docs/LIMITS.md)");
        c_weights_.push_back(*c);
      }
      if (c_weights_.size() < 2) required("head1_weight");
      std::vector<bool> is_weight(header.size(), false);
      for (auto c : c_weights_) is_weight[c] = true;
      // A gap (head1, head3) is almost surely a typo; refuse it rather than drop a head.
      for (std::size_t i = 0; i < header.size(); ++i) {
        const auto& h = header[i];
        if (h.size() > 11 && h.rfind("head", 0) == 0 && h.compare(h.size() - 7, 7, "_weight") == 0 && !is_weight[i])
          throw InputError(reader_.path(), reader_.line(), h,
                           "head columns must be numbered head1_weight..headN_weight without gaps; head" +
                               std::to_string(c_weights_.size()) + "_weight is missing");
      }
      schema_.given_heads = static_cast<std::uint32_t>(c_weights_.size() - 1);
    }
    header_ = std::move(header);
    if (opt.first_line) reader_.set_line(opt.first_line);
    has_row_ = read_row();
  }

  const Schema& schema() const override { return schema_; }
  std::string label() const override { return "CSV reader (core) for " + reader_.path(); }
  std::uint64_t rows_read() const override { return rows_; }

  bool next(ReportBatch& batch, std::size_t max_reports) override {
    batch.clear();
    batch.features.resize(c_features_.size());
    batch.first_report = reports_emitted_;
    // A batch also ends at kBatchTokens tokens, so long reports cannot multiply its memory by
    // --chunk (one report longer than that is a batch of its own).
    while (batch.n_reports() < max_reports && batch.n_tokens() < kBatchTokens) {
      if (!pending_ready_ && !collect_report()) break;
      // A new batch starts where the scenario list changes.
      if (batch.n_reports() > 0 && pending_scenarios_ != batch.scenarios) break;
      append_pending(batch);
    }
    if (batch.n_reports() == 0) {
      if (rows_ == 0) throw InputError(reader_.path(), 0, "", "no data rows after the header");
      if (auto repeat = seen_.check_all(); repeat.first) resumed(repeat);
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

  // A report found twice when older reports were checked (SeenReports): named by its lines.
  [[noreturn]] void resumed(std::pair<std::uint64_t, std::uint64_t> lines) const {
    throw InputError(reader_.path(), lines.second, "report_id",
                     "rows of the report that began at line " + std::to_string(lines.first) +
                         " resume after other reports; keep each report's rows together (sort the file by report_id)");
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
    if (const auto before = seen_.insert(std::hash<std::string>{}(id), first_line))
      throw InputError(reader_.path(), first_line, "report_id",
                       "rows of report '" + id + "' resume after other reports (its rows began at line " +
                           std::to_string(before) + "); keep each report's rows together (sort the file by report_id)");
    if (seen_.repeat_.first) resumed(seen_.repeat_);
    if (!keep_.empty()) seen_selected_.insert(id);  // only --report runs need to know what was found
    // Rows go into flat reused arrays, grouped by scenario in order of first appearance.
    std::vector<std::string>& scen_names = scen_names_;
    auto& groups = groups_;
    auto& rows = pending_;
    rows.clear();
    scen_names.clear();
    for (auto& g : groups) g.clear();
    while (has_row_ && row_report_ == id) {
      if (rows.size() == kMaxReportRows)
        throw InputError(reader_.path(), row_.line, "report_id",
                         "report '" + id + "' has more than " + std::to_string(kMaxReportRows) +
                             " rows (tokens x scenarios); split it (docs/LIMITS.md)");
      auto it = std::find(scen_names.begin(), scen_names.end(), row_.scenario);
      if (it == scen_names.end()) {
        scen_names.push_back(row_.scenario);
        if (groups.size() < scen_names.size()) groups.emplace_back();
        it = scen_names.end() - 1;
      }
      const auto scen = static_cast<std::uint32_t>(it - scen_names.begin());
      groups[scen].push_back(static_cast<std::uint32_t>(rows.size()));
      rows.push(row_, scen);
      has_row_ = read_row();
      while (has_row_ && !keep_.empty() && !keep_.count(row_report_)) has_row_ = read_row();
    }
    const std::size_t n_rows = rows.size();
    groups.resize(scen_names.size());
    const std::size_t per_row = c_features_.size() + c_weights_.size();
    const auto& first = groups[0];
    for (std::size_t s = 1; s < groups.size(); ++s) {
      const auto& g = groups[s];
      if (g.size() != first.size())
        throw InputError(reader_.path(), rows.line[g.back()], "token",
                         "report '" + id + "': scenario '" + scen_names[s] + "' has " + std::to_string(g.size()) +
                             " tokens but scenario '" + scen_names[0] + "' has " + std::to_string(first.size()) +
                             "; every scenario of a report must list the same tokens");
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (rows.token(g[k]) != rows.token(first[k]))
          throw InputError(reader_.path(), rows.line[g[k]], "token",
                           "report '" + id + "': scenario '" + scen_names[s] + "' has token '" + std::string(rows.token(g[k])) +
                               "' where scenario '" + scen_names[0] + "' has '" + std::string(rows.token(first[k])) + "'");
        const double* a = rows.row_values(g[k], per_row);
        const double* b = rows.row_values(first[k], per_row);
        for (std::size_t f = 0; f < c_features_.size(); ++f)
          if (a[f] != b[f])
            throw InputError(reader_.path(), rows.line[g[k]], schema_.feature_names[f],
                             "report '" + id + "', token '" + std::string(rows.token(g[k])) + "': value differs from scenario '" +
                                 scen_names[0] + "' (line " + std::to_string(rows.line[first[k]]) +
                                 "); features describe the token, not the scenario");
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
    const std::size_t nf = c_features_.size(), per_row = nf + c_weights_.size();
    if (b.n_reports() == 0) {
      b.scenarios = pending_scenarios_;
      b.given_weights.assign(pending_scenarios_.size() * c_weights_.size(), {});
    }
    b.report_ids.push_back(pending_id_);
    for (std::uint32_t i : tokens) {
      b.token_names.emplace_back(pending_.token(i));
      const double* v = pending_.row_values(i, per_row);
      for (std::size_t f = 0; f < nf; ++f) b.features[f].push_back(v[f]);
    }
    for (std::size_t j = 0; j < groups_.size(); ++j)
      for (std::uint32_t i : groups_[j]) {
        const double* v = pending_.row_values(i, per_row) + nf;
        for (std::size_t h = 0; h < c_weights_.size(); ++h) b.given_weights[j * c_weights_.size() + h].push_back(v[h]);
      }
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
  SeenReports seen_;  // reports already emitted
  std::uint64_t rows_ = 0, reports_emitted_ = 0;
  bool has_row_ = false;
  std::string row_report_;
  Row row_;
  bool pending_ready_ = false;
  std::string pending_id_;
  std::uint64_t pending_rows_ = 0;
  std::vector<std::uint32_t> pending_scenarios_;
  PendingRows pending_;                             // the pending report's rows (reused)
  std::vector<std::string> scen_names_;             // its scenarios, in order of first appearance
  std::vector<std::vector<std::uint32_t>> groups_;  // its rows (indices into pending_) per scenario
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
