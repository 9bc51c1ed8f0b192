// The row writers behind --format/--output/--per-report: the seed's text blocks, JSON lines and
// CSV, one row per (report, scenario). JSONL and CSV rows are formatted on worker threads (prepare)
// and written in batch order (consume). The --attention map writer: attention_writer.cpp.
#include "headsep/output.hpp"

#include <filesystem>
#include <type_traits>

#include "engine/formatted_rows.hpp"
#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "support/metric_check.hpp"
#include "support/text_util.hpp"

namespace headsep {

Format parse_format(std::string_view name) {
  if (name == "text") return Format::text;
  if (name == "jsonl") return Format::jsonl;
  if (name == "csv") return Format::csv;
  // Rows stream one JSON object per line; a file of them is not one JSON document, so "json" is
  // refused rather than silently written as JSON lines.
  if (name == "json") throw UsageError("--format json: rows are written as JSON lines, one object per line; use --format jsonl");
  throw UsageError("unknown format '" + std::string(name) + "' (expected text, jsonl or csv)");
}

Format format_from_extension(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl") return Format::jsonl;
  if (ext == ".json") throw UsageError(path + ": rows are written as JSON lines, one object per line: name the file .jsonl");
  if (ext == ".csv") return Format::csv;
  if (ext == ".txt") return Format::text;
  throw UsageError(path + ": cannot tell the format from the extension (use .jsonl, .csv or .txt)");
}

namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

// The last guard before rows are written: inf and nan are not JSON, and a CSV reader would take
// them for numbers. The engine's and the model's result checks name the cause first; this one
// catches what they let through (a difference from the single head that overflows while the
// contexts and the separation stay finite).
void check_finite_rows(const BatchResult& res, const RunInfo& info) {
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const MetricBlock& m = res.metrics[j];
    if (!any_nonfinite_metric(m)) continue;
    for (std::size_t r = 0; r < m.n; ++r)
      if (const std::string what = nonfinite_metric(m, r, info.axis_names); !what.empty())
        throw Error("report '" + printable(res.batch->report_id(r), 200) + "', scenario '" +
                    printable(*res.scenario_names[j], 200) + "'" +
                    (res.layers.empty() ? std::string() : ", layer " + std::to_string(res.layers[j])) + ": " + what +
                    " is not finite (the inputs are too large for double; rows hold finite numbers only)");
  }
}

class BufferedWriter : public ResultWriter {
 public:
  BufferedWriter(OutputFile& out, const RunInfo& info) : out_(out), info_(info) {}
  void maybe_flush() {
    if (buf_.size() >= kFlushBytes) {
      out_.write(buf_);
      buf_.clear();
    }
  }
  OutputFile& out_;
  RunInfo info_;
  std::string buf_;
};

// Python's print of a list of round(v, 3) values.
void py_list(std::string& s, const double* v, std::size_t n, std::size_t step = 1) {
  s += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    append_py_float(s, py_round(v[i * step], 3));
  }
  s += ']';
}

// The seed's block format. The header's row counts are only known at the end, so the body is
// held until finish(); use jsonl or csv for large sets.
class TextWriter final : public BufferedWriter {
 public:
  using BufferedWriter::BufferedWriter;
  void consume(const BatchResult& res, SinkPartial*) override {
    check_finite_rows(res, info_);
    const auto& b = *res.batch;
    const std::uint32_t C = static_cast<std::uint32_t>(info_.axis_names.size()), N = info_.heads;
    std::vector<double> v;
    reports_ += b.n_reports();
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      if (first_id_.empty()) first_id_ = b.report_id(r);
      else if (b.report_id(r) != first_id_) multi_ = true;
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        body_.push_back({b.report_id(r), {}});
        std::string& s = body_.back().second;
        s += '[' + *res.scenario_names[j] + "]\n";
        s += "tokens = [";
        for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
          if (t != b.token_offset[r]) s += ", ";
          append_py_str(s, b.token_name(r, t));
        }
        s += "]\n";
        auto row = [&](std::string label, std::uint32_t h) {
          if (label.size() < 19) label.resize(19, ' ');
          s += label + " = ";
          v.clear();
          for (std::uint32_t c = 0; c < C; ++c) v.push_back(m.ctx(h, c, r));
          py_list(s, v.data(), v.size());
          s += '\n';
        };
        row("single_head_context", 0);
        for (std::uint32_t h = 1; h <= N; ++h) row("head" + std::to_string(h) + "_context", h);
        s += "difference_from_single = ";
        v.clear();
        for (std::uint32_t h = 1; h <= N; ++h)
          for (std::uint32_t c = 0; c < C; ++c) v.push_back(m.diff(h, c, r));
        py_list(s, v.data(), v.size());
        s += "\nhead_separation = ";
        append_py_float(s, py_round(m.separation[r], 3));
        s += '\n';
        if (N > 2) {
          s += "pairwise_separation = ";
          v.clear();
          for (std::size_t p = 0; p < pair_count(N); ++p) v.push_back(m.pair(p, r));
          py_list(s, v.data(), v.size());
          s += '\n';
        }
      }
    }
  }
  void finish(std::uint64_t rows_read, std::uint64_t rows_selected) override {
    if (rows_read || rows_selected) {
      buf_ += "csv_rows = " + std::to_string(rows_read) + "\n";
      buf_ += "focus_report_rows = " + std::to_string(rows_selected) + "\n";
    } else {  // a generated set has no input rows: say how many reports it produced
      buf_ += "reports = " + std::to_string(reports_) + "\n";
    }
    buf_ += "context_axes = [";
    for (std::size_t c = 0; c < info_.axis_names.size(); ++c) {
      if (c) buf_ += ", ";
      append_py_str(buf_, info_.axis_names[c]);
    }
    buf_ += "]\n\n";
    bool first = true;
    for (auto& [id, block] : body_) {
      if (!first) buf_ += '\n';  // blocks are separated by one blank line, none after the last
      first = false;
      // With one report the seed's exact format; with several, each block names its report.
      if (multi_) {
        auto nl = block.find('\n');
        std::string line = "report_id = ";
        append_py_str(line, id);
        block.insert(nl + 1, line + "\n");
      }
      buf_ += block;
      maybe_flush();
    }
    out_.write(buf_);
    buf_.clear();
  }

 private:
  std::vector<std::pair<std::string, std::string>> body_;
  std::string first_id_;
  bool multi_ = false;
  std::uint64_t reports_ = 0;
};

// RunInfo::kv_head_of is empty or names one key/value head per query head (model_run_info's
// job: a mismatch is a bug, not bad data).
void check_kv_heads(const RunInfo& info) {
  if (!info.kv_head_of.empty() && info.kv_head_of.size() != info.heads)
    throw Error("rows: " + std::to_string(info.kv_head_of.size()) + " key/value heads given for " +
                std::to_string(info.heads) + " query heads");
}

std::string head_label(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("single"); }

// The head and pair statistics' columns (for_each_attention_value's order): add(name, kind).
template <class Add>
void attention_column_names(const RunInfo& info, Add& add) {
  const auto& kv = info.kv_head_of;
  for (std::uint32_t h = 0; h <= info.heads; ++h) {
    for (std::uint32_t k = 0; k < kHeadStats; ++k) add(head_label(h) + "_" + std::string(head_stat_name(k)), RowColumnKind::metric);
    if (h && !kv.empty()) add(head_label(h) + "_kv_head", RowColumnKind::kv_head);
  }
  for (std::uint32_t i = 1; i <= info.heads; ++i)
    for (std::uint32_t j = i + 1; j <= info.heads; ++j) {
      const std::string pair = head_label(i) + "_" + head_label(j) + "_";
      for (std::uint32_t k = 0; k < kPairStats; ++k) add(pair + std::string(pair_stat_name(k)), RowColumnKind::metric);
      if (!kv.empty()) add(pair + "shared_kv", RowColumnKind::shared_kv);
    }
}

/// "attention":{"heads":{"single":{"entropy":..},"head1":{..}},"pairs":{"head1_head2":{..}}}; a
/// decoder's (kv = RunInfo::kv_head_of, not empty) query heads end with "kv_head":K, its pairs
/// with "shared_kv":true|false.
void append_json_attention(std::string& s, const MetricBlock& m, std::size_t r, const std::vector<std::uint32_t>& kv) {
  s += ",\"attention\":{\"heads\":{";
  for (std::uint32_t h = 0; h <= m.heads; ++h) {
    if (h) s += ',';
    append_json_string(s, head_label(h));
    s += ":{";
    for (std::uint32_t k = 0; k < m.head_stat_count; ++k) {
      if (k) s += ',';
      append_json_string(s, head_stat_name(k));
      s += ':';
      append_json_number(s, m.head_stat(h, k, r));
    }
    if (h && h <= kv.size()) {  // kv: empty, or H long (check_kv_heads)
      s += ",\"kv_head\":";
      append_uint(s, kv[h - 1]);
    }
    s += '}';
  }
  s += "},\"pairs\":{";
  std::size_t p = 0;
  for (std::uint32_t i = 1; i <= m.heads; ++i)
    for (std::uint32_t j = i + 1; j <= m.heads; ++j, ++p) {
      if (p) s += ',';
      append_json_string(s, head_label(i) + "_" + head_label(j));
      s += ":{";
      for (std::uint32_t k = 0; k < m.pair_stat_count; ++k) {
        if (k) s += ',';
        append_json_string(s, pair_stat_name(k));
        s += ':';
        append_json_number(s, m.pair_stat(p, k, r));
      }
      if (j <= kv.size()) s += kv[i - 1] == kv[j - 1] ? ",\"shared_kv\":true" : ",\"shared_kv\":false";
      s += '}';
    }
  s += "}}";
}

class RowWriter : public BufferedWriter {
 public:
  using BufferedWriter::BufferedWriter;
  void prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const override {
    check_finite_rows(res, info_);
    auto f = std::make_unique<FormattedRows>();
    format(res, f->bytes);
    partial = std::move(f);
  }
  void consume(const BatchResult& res, SinkPartial* partial) override {
    if (auto* f = dynamic_cast<FormattedRows*>(partial)) {
      out_.write(f->bytes);
    } else {
      check_finite_rows(res, info_);
      std::string s;
      format(res, s);
      out_.write(s);
    }
  }
  void finish(std::uint64_t, std::uint64_t) override {
    out_.write(buf_);
    buf_.clear();
  }

 protected:
  virtual void format(const BatchResult& res, std::string& s) const = 0;
};

class JsonlWriter final : public RowWriter {
 public:
  JsonlWriter(OutputFile& out, const RunInfo& info) : RowWriter(out, info) { check_kv_heads(info_); }

 protected:
  void format(const BatchResult& res, std::string& s) const override {
    const auto& b = *res.batch;
    const std::uint32_t C = static_cast<std::uint32_t>(info_.axis_names.size()), N = info_.heads;
    std::string tokens;  // the same for every scenario of a report
    const bool model = !res.layers.empty();  // a model run: one row per layer, with the token ids
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const std::string id = b.report_id(r);
      tokens.clear();
      append_json_tokens(tokens, b, r);
      if (model) {
        tokens += ",\"token_ids\":";
        append_json_token_ids(tokens, res, r);
      }
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        s += "{\"report_id\":";
        append_json_string(s, id);
        s += ",\"scenario\":";
        append_json_string(s, *res.scenario_names[j]);
        if (model) s += ",\"layer\":" + std::to_string(res.layers[j]) + ",\"n_tokens\":" + std::to_string(b.report_length(r));
        s += ",\"tokens\":";
        s += tokens;
        s += ",\"single_head_context\":[";
        for (std::uint32_t c = 0; c < C; ++c) {
          if (c) s += ',';
          append_json_number(s, m.ctx(0, c, r));
        }
        s += "],\"head_contexts\":[";
        for (std::uint32_t h = 1; h <= N; ++h) {
          s += h > 1 ? ",[" : "[";
          for (std::uint32_t c = 0; c < C; ++c) {
            if (c) s += ',';
            append_json_number(s, m.ctx(h, c, r));
          }
          s += ']';
        }
        s += "],\"difference_from_single\":[";
        for (std::uint32_t h = 1; h <= N; ++h)
          for (std::uint32_t c = 0; c < C; ++c) {
            if (h > 1 || c) s += ',';
            append_json_number(s, m.diff(h, c, r));
          }
        s += "],\"head_separation\":";
        append_json_number(s, m.separation[r]);
        if (N > 2) {
          s += ",\"pairwise_separation\":[";
          for (std::size_t p = 0; p < pair_count(N); ++p) {
            if (p) s += ',';
            append_json_number(s, m.pair(p, r));
          }
          s += ']';
        }
        if (m.attention()) append_json_attention(s, m, r, info_.kv_head_of);
        s += "}\n";
      }
    }
  }
};

class CsvWriter final : public RowWriter {
 public:
  CsvWriter(OutputFile& out, const RunInfo& info) : RowWriter(out, info) {
    std::string s = info_.layers ? "report_id,scenario,layer,n_tokens,tokens,token_ids" : "report_id,scenario,tokens";
    for (const auto& name : row_column_names(info_)) {
      s += ',';
      append_csv_field(s, name);
    }
    s += "\r\n";
    out_.write(s);
  }

 protected:
  void format(const BatchResult& res, std::string& s) const override {
    const auto& b = *res.batch;
    std::string tokens, ids;
    const bool model = !res.layers.empty();  // a model run: one row per layer, with the token ids
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const std::string id = b.report_id(r);
      tokens.clear();
      append_json_tokens(tokens, b, r);
      if (model) {
        ids.clear();
        append_json_token_ids(ids, res, r);
      }
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        append_csv_field(s, id);
        s += ',';
        append_csv_field(s, *res.scenario_names[j]);
        if (model) s += ',' + std::to_string(res.layers[j]) + ',' + std::to_string(b.report_length(r));
        s += ',';
        append_csv_field(s, tokens);
        if (model) {
          s += ',';
          append_csv_field(s, ids);
        }
        for_each_row_value(m, r, info_, [&s](auto v) {
          s += ',';
          if constexpr (std::is_same_v<decltype(v), KvHead>) append_uint(s, v.index);
          else if constexpr (std::is_same_v<decltype(v), SharedKv>) s += v.shared ? "true" : "false";
          else append_json_number(s, v);
        });
        s += "\r\n";
      }
    }
  }
};

}  // namespace

std::vector<std::string> row_column_names(const RunInfo& info, std::vector<RowColumnKind>* kinds) {
  check_kv_heads(info);
  std::vector<std::string> names;
  if (kinds) kinds->clear();
  auto add = [&](std::string name, RowColumnKind kind = RowColumnKind::metric) {
    names.push_back(std::move(name));
    if (kinds) kinds->push_back(kind);
  };
  auto cols = [&](const std::string& prefix) {
    for (const auto& a : info.axis_names) add(prefix + a);
  };
  cols("single_");
  for (std::uint32_t h = 1; h <= info.heads; ++h) cols("head" + std::to_string(h) + "_");
  for (std::uint32_t h = 1; h <= info.heads; ++h) cols("diff_head" + std::to_string(h) + "_");
  add("head_separation");
  if (info.heads > 2)
    for (std::uint32_t i = 1; i <= info.heads; ++i)
      for (std::uint32_t j = i + 1; j <= info.heads; ++j) add("separation_" + std::to_string(i) + "_" + std::to_string(j));
  if (info.attention) attention_column_names(info, add);
  return names;
}

std::unique_ptr<ResultWriter> make_writer(Format format, OutputFile& out, const RunInfo& info) {
  switch (format) {
    case Format::text: return std::make_unique<TextWriter>(out, info);
    case Format::jsonl: return std::make_unique<JsonlWriter>(out, info);
    case Format::csv: return std::make_unique<CsvWriter>(out, info);
  }
  throw UsageError("unknown format");
}

}  // namespace headsep
