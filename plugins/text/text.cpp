// text — reports as text, one per row of a CSV (header with report_id, text and optionally
// scenario; RFC 4180 quoting, fields may span lines) or a JSON-lines file (objects with
// "report_id", "text", optional "scenario"), tokenized with a model's WordPiece vocabulary
// (text_reports.hpp). Streams: one chunk in memory; a chunk ends where the scenario changes.
// Every error names the file and the line the report starts on; text that is not valid UTF-8
// is an error; an empty or whitespace-only text is a report of [CLS] [SEP] (text_status 2).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>

#include "headsep/plugin_sdk.hpp"
#include "text_reports.hpp"
#include "support/json_input.hpp"  // JSON lines: depth bounded, errors located
#include "support/text_util.hpp"  // the core's UTF-8 check (a built-in plugin, linked with the core)

namespace {

using namespace headsep::sdk;
using headsep_text::ChunkBuilder;
using headsep_text::Tokenizer;

struct Record {
  std::uint64_t line = 0;
  std::string id, text, scenario;
};

bool valid_utf8(std::string_view s) { return !headsep::find_invalid_utf8(s); }

class TextGenerator final : public ScenarioGenerator {
 public:
  explicit TextGenerator(const Params& p)
      : path_(p.get_string("path")),
        tk_(p.get_string("model"), p.get_int("max_tokens"), p.get_string("lexicon")),
        names_(p.get_bool("names")) {
    if (path_.empty()) throw ParamError("parameter 'path' is empty: give the CSV or JSON-lines file of reports");
    std::string fmt = p.get_string("format");
    if (fmt == "auto") {
      const std::string ext = path_.size() >= 6 ? path_.substr(path_.size() - 6) : path_;
      fmt = (ext == ".jsonl" || (path_.size() >= 5 && path_.substr(path_.size() - 5) == ".json")) ? "jsonl" : "csv";
    }
    if (fmt != "csv" && fmt != "jsonl") throw ParamError("parameter 'format' must be auto, csv or jsonl, got '" + fmt + "'");
    jsonl_ = fmt == "jsonl";
    in_.open(path_, std::ios::binary);
    if (!in_) throw PluginError(path_ + ": cannot open");
    skip_bom();
    if (!jsonl_) read_header();
    // Peek at the first report: a scenario column/field decides whether the data names scenarios.
    pending_ = next_record();
    if (jsonl_) has_scenario_ = pending_ && !pending_->scenario.empty();
  }

  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = tk_.features();
    s.names_scenarios = has_scenario_;
    return s;
  }

  bool chunk(std::uint64_t, std::uint64_t max_reports, ChunkWriter& out) override {
    out.rows_read(rows_);
    if (!pending_) return false;
    cb_.reset(tk_.axes().size());
    ids_.clear();
    const std::string scenario = pending_->scenario;
    while (pending_ && cb_.reports() < max_reports && pending_->scenario == scenario) {
      const Record& r = *pending_;
      const std::string where = path_ + ":" + std::to_string(r.line) + ": ";
      if (!valid_utf8(r.id)) throw PluginError(where + "the report id is not valid UTF-8");
      if (!valid_utf8(r.scenario)) throw PluginError(where + "the scenario is not valid UTF-8");
      try {
        tk_.encode(r.text, cb_.enc);
      } catch (const headsep::Error& e) {
        throw PluginError(where + "report '" + r.id + "': text is not valid UTF-8 (" + e.what() + " of the text)");
      }
      if (cb_.enc.ids.empty()) throw PluginError(where + "report '" + r.id + "': " + headsep_text::kNoTokenReason);
      cb_.add(tk_, names_);
      ids_.push_back(r.id);
      pending_ = next_record();
    }
    if (has_scenario_) {
      if (scenario.empty()) throw PluginError(path_ + ": a report has an empty scenario");
      out.scenario(scenario);
    }
    cb_.write(out);
    for (const auto& id : ids_) out.report_id(id);
    out.source_rows(cb_.reports());
    out.rows_read(rows_);
    return true;
  }

 private:
  [[noreturn]] void fail(std::uint64_t line, const std::string& what) const {
    throw PluginError(path_ + ":" + std::to_string(line) + ": " + what);
  }

  /// A UTF-8 byte order mark at the start of the file is not text (both formats; Python's
  /// utf-8-sig, and what the CSV reader of `run --input` and `headsep tokenize` drop too).
  void skip_bom() {
    char b[3] = {};
    in_.read(b, 3);
    if (in_.gcount() == 3 && b[0] == '\xEF' && b[1] == '\xBB' && b[2] == '\xBF') return;
    in_.clear();
    in_.seekg(0);
  }

  /// One physical line without its line break (JSON lines); false at end of file.
  bool get_line(std::string& s) {
    if (!std::getline(in_, s)) return false;
    ++line_;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return true;
  }

  int get() { return in_.rdbuf()->sbumpc(); }
  int peek() { return in_.rdbuf()->sgetc(); }

  /// One CSV record as Python's csv module reads it (RFC 4180): quoted fields may hold commas,
  /// "" and line breaks, kept as written (a CR before an LF included); records end at LF, CRLF
  /// or CR; blank lines are skipped. `line_` counts the line breaks read; `start` is the record's
  /// first line.
  bool csv_record(std::vector<std::string>& fields, std::uint64_t& start) {
    constexpr int kEof = std::char_traits<char>::eof();
    int c = get();
    while (c == '\n' || c == '\r') {
      if (c == '\r' && peek() == '\n') get();
      ++line_;
      c = get();
    }
    if (c == kEof) return false;
    start = line_ + 1;
    fields.assign(1, {});
    for (;;) {
      if (c == '"') {
        for (;;) {
          c = get();
          if (c == kEof) fail(start, "unterminated quoted field");
          if (c == '"') {
            if (peek() != '"') break;
            get();
          } else if (c == '\n' || (c == '\r' && peek() != '\n')) {
            ++line_;
          }
          fields.back() += static_cast<char>(c);
        }
        c = get();
        if (c != ',' && c != '\n' && c != '\r' && c != kEof) fail(line_ + 1, "characters after a closing quote");
      } else {
        while (c != ',' && c != '\n' && c != '\r' && c != kEof) {
          if (c == '"') fail(line_ + 1, "a quote inside an unquoted field (quote the whole field and double the quote)");
          fields.back() += static_cast<char>(c);
          c = get();
        }
      }
      if (c == ',') {
        fields.emplace_back();
        c = get();
        continue;
      }
      if (c == '\r' && peek() == '\n') get();
      if (c != kEof) ++line_;
      return true;
    }
  }

  void read_header() {
    std::vector<std::string> h;
    std::uint64_t start = 0;
    if (!csv_record(h, start)) fail(1, "empty file: expected a header with report_id and text");
    for (std::size_t i = 0; i < h.size(); ++i) {
      for (std::size_t k = 0; k < i; ++k)  // as the seed CSV reader: one column per name (else the last won)
        if (h[k] == h[i]) fail(start, "duplicate column name '" + h[i] + "' (columns " + std::to_string(k + 1) + " and " + std::to_string(i + 1) + ")");
      if (h[i] == "report_id") col_id_ = static_cast<int>(i);
      else if (h[i] == "text") col_text_ = static_cast<int>(i);
      else if (h[i] == "scenario") col_scenario_ = static_cast<int>(i);
    }
    if (col_id_ < 0 || col_text_ < 0) fail(start, "the header needs the columns report_id and text (and optionally scenario)");
    n_cols_ = h.size();
    has_scenario_ = col_scenario_ >= 0;
  }

  std::optional<Record> next_record() {
    Record r;
    if (!jsonl_) {
      std::vector<std::string> f;
      if (!csv_record(f, r.line)) return std::nullopt;
      if (f.size() != n_cols_)
        fail(r.line, std::to_string(f.size()) + " fields, the header has " + std::to_string(n_cols_));
      r.id = std::move(f[col_id_]);
      r.text = std::move(f[col_text_]);
      if (col_scenario_ >= 0) r.scenario = std::move(f[col_scenario_]);
    } else {
      std::string line;
      do {
        if (!get_line(line)) return std::nullopt;
      } while (line.find_first_not_of(" \t") == std::string::npos);
      r.line = line_;
      headsep::JsonProblem problem;
      auto parsed = headsep::try_parse_json(line, problem);
      if (!parsed) fail(r.line, problem.in_line());
      nlohmann::json& j = *parsed;
      if (!j.is_object()) fail(r.line, "expected a JSON object with report_id and text");
      if (!j.contains("text") || !j["text"].is_string()) fail(r.line, "\"text\" is missing or not a string");
      if (!j.contains("report_id") || !(j["report_id"].is_string() || j["report_id"].is_number_integer()))
        fail(r.line, "\"report_id\" is missing or not a string or integer");
      r.id = j["report_id"].is_string() ? j["report_id"].get<std::string>() : j["report_id"].dump();
      r.text = j["text"].get<std::string>();
      if (j.contains("scenario")) {
        if (!j["scenario"].is_string()) fail(r.line, "\"scenario\" must be a string");
        r.scenario = j["scenario"].get<std::string>();
      }
      if (has_scenario_ && r.scenario.empty()) fail(r.line, "\"scenario\" is missing (the first report has one)");
      if (!has_scenario_ && !r.scenario.empty() && rows_ > 0)
        fail(r.line, "\"scenario\" is given but the first report has none");
    }
    ++rows_;
    return r;
  }

  std::string path_;
  Tokenizer tk_;
  bool names_ = false, jsonl_ = false, has_scenario_ = false;
  std::ifstream in_;
  std::uint64_t line_ = 0, rows_ = 0;
  int col_id_ = -1, col_text_ = -1, col_scenario_ = -1;
  std::size_t n_cols_ = 0;
  std::optional<Record> pending_;
  ChunkBuilder cb_;
  std::vector<std::string> ids_;
};

constexpr headsep_param_spec kParams[] = {
    {"path", HEADSEP_PARAM_STRING, nullptr, "CSV (report_id,text[,scenario]) or JSON-lines file of reports"},
    {"format", HEADSEP_PARAM_STRING, "auto", "csv, jsonl, or auto (from the extension: .jsonl/.json = jsonl)"},
    {"model", HEADSEP_PARAM_STRING, "", "model folder with vocab.txt (headsep run --model DIR passes it)"},
    {"max_tokens", HEADSEP_PARAM_INT, "0", "tokens per report incl. [CLS]/[SEP], longer ones truncated (0 = the model folder's truncation length, docs/MODEL.md)"},
    {"lexicon", HEADSEP_PARAM_STRING, "", "CSV word,AXIS1,... giving each word's context-axis values (empty = the built-in ops lexicon)"},
    {"names", HEADSEP_PARAM_BOOL, "false", "emit token names (the WordPiece tokens)"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(TextGenerator, "text", "0.1.0",
                        "Text reports from CSV or JSON lines, WordPiece-tokenized with a model's vocab.txt", kParams)
