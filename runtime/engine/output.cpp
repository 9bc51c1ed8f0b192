#include "headsep/output.hpp"

#include "headsep/attention.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep {

// ---- temporaries a signal must not leave behind --------------------------------------------
// A fixed table of C strings the signal handler can read without locks or allocation: unlink()
// and write() are async-signal-safe, std::remove and iostreams are not.
namespace {
constexpr std::size_t kMaxTemporaries = 256;
std::atomic<char*> g_temporaries[kMaxTemporaries];

std::size_t register_temporary(const std::string& path) {
  char* copy = ::strdup(path.c_str());
  for (std::size_t i = 0; copy && i < kMaxTemporaries; ++i) {
    char* expected = nullptr;
    if (g_temporaries[i].compare_exchange_strong(expected, copy)) return i;
  }
  std::free(copy);
  return kMaxTemporaries;  // table full: still removed by the destructor, not by a signal
}
void forget_temporary(std::size_t slot) {
  if (slot < kMaxTemporaries) std::free(g_temporaries[slot].exchange(nullptr));
}

// Unnamed (O_TMPFILE) outputs not yet committed: exiting discards them, the handler says so.
std::atomic<int> g_anonymous{0};

void on_signal(int sig) {
  int removed = g_anonymous.load() > 0;
  for (auto& t : g_temporaries)
    if (char* p = t.exchange(nullptr)) removed += ::unlink(p) == 0;
  if (sig != SIGPIPE) {  // a closed stdout (| head) ends quietly
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    char line[128] = "headsep: interrupted by ";
    std::size_t n = std::strlen(line);
    for (const char* c = name; *c; ++c) line[n++] = *c;
    const char* tail = removed ? "; removed unfinished output\n" : "\n";
    for (const char* c = tail; *c; ++c) line[n++] = *c;
    [[maybe_unused]] auto w = ::write(STDERR_FILENO, line, n);
  }
  ::_exit(128 + sig);
}
}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = &on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &sa, nullptr);
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    return;
  }
  // Devices and pipes (/dev/null, /dev/stdout, a FIFO) are written in place: renaming a
  // temporary over them would replace the device with a regular file.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw Error(path + ": cannot open output: " + std::strerror(errno));
    direct_ = true;
    return;
  }
  // First choice: an unnamed file in the target folder (O_TMPFILE), linked in at commit. It has
  // no name until then, so nothing can be left behind, not even by SIGKILL (mpirun kills the
  // ranks of a failed job 1 s after SIGTERM; a loaded machine may not run the handler in time).
  // Where the file system or kernel lacks O_TMPFILE (or /proc is missing for the link), a named
  // temporary that the signal handler and the destructor remove (HEADSEP_OUTPUT_TMPFILE=0 forces
  // it: tests cover both).
  int fd = -1;
#ifdef O_TMPFILE
  const char* use = std::getenv("HEADSEP_OUTPUT_TMPFILE");
  if ((!use || std::strcmp(use, "0") != 0) && ::access("/proc/self/fd", X_OK) == 0) {
    const auto parent = std::filesystem::path(path).parent_path();
    fd = ::open(parent.empty() ? "." : parent.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
      throw Error(path + ": cannot create output: " + std::strerror(errno));
    anonymous_ = fd >= 0;
    if (anonymous_) ++g_anonymous;
  }
#endif
  if (fd < 0) {
    tmp_ = path + ".tmp-XXXXXX";
    fd = ::mkstemp(tmp_.data());
    if (fd < 0) throw Error(path + ": cannot create output: " + std::strerror(errno));
    slot_ = register_temporary(tmp_);
  }
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    if (!anonymous_) {
      forget_temporary(slot_);
      std::remove(tmp_.c_str());
    } else {
      --g_anonymous;
      anonymous_ = false;
    }
    throw Error(path + ": cannot open output: " + std::strerror(err));
  }
}

OutputFile::~OutputFile() {
  if (file_ && file_ != stdout) {
    std::fclose(file_);
    if (!committed_ && !direct_ && !anonymous_) std::remove(tmp_.c_str());
  }
  if (anonymous_ && !committed_) --g_anonymous;
  forget_temporary(slot_);
}

void OutputFile::write(std::string_view bytes) {
  if (bytes.empty()) return;
  if (capture_) return (void)capture_->append(bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw Error((path_.empty() ? std::string("<stdout>") : path_) + ": write failed: " + std::strerror(errno));
}

std::uint64_t OutputFile::position() {
  const off_t at = file_ && file_ != stdout ? ::ftello(file_) : -1;
  if (at < 0) throw Error(path_ + ": cannot tell the write position: " + std::strerror(errno));
  return static_cast<std::uint64_t>(at);
}

void OutputFile::skip(std::uint64_t bytes) {
  if (!file_ || file_ == stdout || ::fseeko(file_, static_cast<off_t>(bytes), SEEK_CUR) != 0)
    throw Error(path_ + ": cannot seek: " + std::strerror(errno));
}

std::string OutputFile::shared_path() const {
  if (!file_ || file_ == stdout || direct_) return {};
  if (anonymous_) return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(::fileno(file_));
  return tmp_;
}

void OutputFile::commit() {
  if (capture_) return;
  if (std::fflush(file_) != 0) throw Error(path_ + ": write failed: " + std::strerror(errno));
  if (file_ == stdout) return;
  if (direct_) {
    std::fclose(file_);
    file_ = nullptr;
    committed_ = true;
    return;
  }
  // mkstemp and O_TMPFILE create 0600; give the file the usual permissions.
  ::fchmod(::fileno(file_), 0644);
  if (anonymous_) return link_anonymous();
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    std::remove(tmp_.c_str());
    throw Error(path_ + ": write failed: " + std::strerror(errno));
  }
  file_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw Error(path_ + ": cannot rename output into place: " + std::strerror(errno));
  }
  forget_temporary(slot_);  // renamed: a later signal must not touch the name
  committed_ = true;
}

// Gives the unnamed file its name. linkat never replaces a file, so: linked straight to PATH when
// PATH does not exist (atomic: complete or absent); else linked to a fresh temporary name that is
// renamed over PATH (atomic replace). That name exists only between the two calls and is in the
// signal handler's table meanwhile. linkat through /proc/self/fd needs no privilege
// (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
void OutputFile::link_anonymous() {
  const std::string self = "/proc/self/fd/" + std::to_string(::fileno(file_));
  auto fail = [&](const char* what) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    throw Error(path_ + ": " + what + ": " + std::strerror(err));
  };
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    if (errno != EEXIST) fail("cannot link output into place");
    for (int attempt = 0;; ++attempt) {
      tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
      slot_ = register_temporary(tmp_);
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      forget_temporary(slot_);
      slot_ = std::size_t(-1);
      if (errno != EEXIST || attempt == 100) fail("cannot link output into place");
    }
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp_.c_str());
      errno = err;
      fail("cannot rename output into place");
    }
    forget_temporary(slot_);
  }
  // Linked: the data are in the file whatever close() says (it was flushed above).
  std::fclose(file_);
  file_ = nullptr;
  committed_ = true;
  --g_anonymous;
}

Format parse_format(std::string_view name) {
  if (name == "text") return Format::text;
  if (name == "jsonl" || name == "json") return Format::jsonl;
  if (name == "csv") return Format::csv;
  throw UsageError("unknown format '" + std::string(name) + "' (expected text, jsonl or csv)");
}

Format format_from_extension(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return Format::jsonl;
  if (ext == ".csv") return Format::csv;
  if (ext == ".txt") return Format::text;
  throw UsageError(path + ": cannot tell the format from the extension (use .jsonl, .csv or .txt)");
}

namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

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

// Report r's tokens as a JSON array (used whole in JSONL, as one field in CSV).
void append_json_tokens(std::string& s, const ReportBatch& b, std::size_t r) {
  s += '[';
  for (auto t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
    if (t != b.token_offset[r]) s += ',';
    append_json_string(s, b.token_name(r, t));
  }
  s += ']';
}

// Rows are formatted on worker threads (prepare) and written in batch order (consume).
struct Formatted : SinkPartial {
  std::string bytes;
};

std::string head_label(std::uint32_t h) { return h ? "head" + std::to_string(h) : std::string("single"); }

/// "attention":{"heads":{"single":{"entropy":..},"head1":{..}},"pairs":{"head1_head2":{..}}}
void append_json_attention(std::string& s, const MetricBlock& m, std::size_t r) {
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
      s += '}';
    }
  s += "}}";
}

class RowWriter : public BufferedWriter {
 public:
  using BufferedWriter::BufferedWriter;
  void prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const override {
    auto f = std::make_unique<Formatted>();
    format(res, f->bytes);
    partial = std::move(f);
  }
  void consume(const BatchResult& res, SinkPartial* partial) override {
    if (auto* f = dynamic_cast<Formatted*>(partial)) {
      out_.write(f->bytes);
    } else {
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
  using RowWriter::RowWriter;

 protected:
  void format(const BatchResult& res, std::string& s) const override {
    const auto& b = *res.batch;
    const std::uint32_t C = static_cast<std::uint32_t>(info_.axis_names.size()), N = info_.heads;
    std::string tokens;  // the same for every scenario of a report
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const std::string id = b.report_id(r);
      tokens.clear();
      append_json_tokens(tokens, b, r);
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        s += "{\"report_id\":";
        append_json_string(s, id);
        s += ",\"scenario\":";
        append_json_string(s, *res.scenario_names[j]);
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
        if (m.attention()) append_json_attention(s, m, r);
        s += "}\n";
      }
    }
  }
};

class CsvWriter final : public RowWriter {
 public:
  CsvWriter(OutputFile& out, const RunInfo& info) : RowWriter(out, info) {
    const auto& ax = info_.axis_names;
    std::string s = "report_id,scenario,tokens";
    auto cols = [&](const std::string& prefix) {
      for (const auto& a : ax) {
        s += ',';
        append_csv_field(s, prefix + a);
      }
    };
    cols("single_");
    for (std::uint32_t h = 1; h <= info_.heads; ++h) cols("head" + std::to_string(h) + "_");
    for (std::uint32_t h = 1; h <= info_.heads; ++h) cols("diff_head" + std::to_string(h) + "_");
    s += ",head_separation";
    if (info_.heads > 2)
      for (std::uint32_t i = 1; i <= info_.heads; ++i)
        for (std::uint32_t j = i + 1; j <= info_.heads; ++j) s += ",separation_" + std::to_string(i) + "_" + std::to_string(j);
    if (info_.attention) {
      for (std::uint32_t h = 0; h <= info_.heads; ++h)
        for (std::uint32_t k = 0; k < kHeadStats; ++k) s += "," + head_label(h) + "_" + std::string(head_stat_name(k));
      for (std::uint32_t i = 1; i <= info_.heads; ++i)
        for (std::uint32_t j = i + 1; j <= info_.heads; ++j)
          for (std::uint32_t k = 0; k < kPairStats; ++k)
            s += "," + head_label(i) + "_" + head_label(j) + "_" + std::string(pair_stat_name(k));
    }
    s += "\r\n";
    out_.write(s);
  }

 protected:
  void format(const BatchResult& res, std::string& s) const override {
    const auto& b = *res.batch;
    const std::uint32_t C = static_cast<std::uint32_t>(info_.axis_names.size()), N = info_.heads;
    std::string tokens;
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const std::string id = b.report_id(r);
      tokens.clear();
      append_json_tokens(tokens, b, r);
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        append_csv_field(s, id);
        s += ',';
        append_csv_field(s, *res.scenario_names[j]);
        s += ',';
        append_csv_field(s, tokens);
        for (std::uint32_t h = 0; h <= N; ++h)
          for (std::uint32_t c = 0; c < C; ++c) {
            s += ',';
            append_json_number(s, m.ctx(h, c, r));
          }
        for (std::uint32_t h = 1; h <= N; ++h)
          for (std::uint32_t c = 0; c < C; ++c) {
            s += ',';
            append_json_number(s, m.diff(h, c, r));
          }
        s += ',';
        append_json_number(s, m.separation[r]);
        if (N > 2)
          for (std::size_t p = 0; p < pair_count(N); ++p) {
            s += ',';
            append_json_number(s, m.pair(p, r));
          }
        if (m.attention()) {
          for (std::uint32_t h = 0; h <= N; ++h)
            for (std::uint32_t k = 0; k < m.head_stat_count; ++k) {
              s += ',';
              append_json_number(s, m.head_stat(h, k, r));
            }
          for (std::size_t p = 0; p < pair_count(N); ++p)
            for (std::uint32_t k = 0; k < m.pair_stat_count; ++k) {
              s += ',';
              append_json_number(s, m.pair_stat(p, k, r));
            }
        }
        s += "\r\n";
      }
    }
  }
};

/// --attention: one JSON line per kept (report, scenario) with its maps and multi-head output.
class AttentionMapWriter final : public ResultSink {
 public:
  AttentionMapWriter(OutputFile& out, std::function<bool(const ReportBatch&, std::size_t)> only)
      : out_(out), only_(std::move(only)) {}
  void prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const override {
    auto f = std::make_unique<Formatted>();
    format(res, f->bytes);
    partial = std::move(f);
  }
  void consume(const BatchResult& res, SinkPartial* partial) override {
    if (auto* f = dynamic_cast<Formatted*>(partial)) return out_.write(f->bytes);
    std::string s;
    format(res, s);
    out_.write(s);
  }

 private:
  static void rows(std::string& s, const float* a, std::size_t nrows, std::size_t width) {
    s += '[';
    for (std::size_t q = 0; q < nrows; ++q) {
      s += q ? ",[" : "[";
      for (std::size_t k = 0; k < width; ++k) {
        if (k) s += ',';
        append_json_number(s, static_cast<double>(a[q * width + k]));
      }
      s += ']';
    }
    s += ']';
  }
  void format(const BatchResult& res, std::string& s) const {
    const auto& b = *res.batch;
    for (std::size_t j = 0; j < res.dumps.size(); ++j) {
      const AttentionDump& d = res.dumps[j];
      for (std::size_t i = 0; i < d.reports.size(); ++i) {
        const std::size_t r = d.reports[i], n = b.report_length(r), nq = d.n_queries[i];
        if (only_ && !only_(b, r)) continue;
        s += "{\"report_id\":";
        append_json_string(s, b.report_id(r));
        s += ",\"report_index\":" + std::to_string(b.first_report + r) + ",\"scenario\":";
        append_json_string(s, *res.scenario_names[j]);
        s += ",\"tokens\":";
        append_json_tokens(s, b, r);
        s += ",\"queries\":[";
        for (std::size_t q = 0; q < nq; ++q) s += (q ? "," : "") + std::to_string(d.queries[i] + q);
        s += "],\"single\":";
        const float* maps = d.maps.data() + d.maps_offset[i];
        rows(s, maps, nq, n);
        s += ",\"heads\":[";
        for (std::uint32_t h = 1; h <= d.heads; ++h) {
          if (h > 1) s += ',';
          rows(s, maps + std::size_t(h) * nq * n, nq, n);
        }
        s += ']';
        if (d.d_model) {
          s += ",\"output\":";
          rows(s, d.output.data() + d.output_offset[i], nq, d.d_model);
        }
        s += "}\n";
      }
    }
  }
  OutputFile& out_;
  std::function<bool(const ReportBatch&, std::size_t)> only_;
};

}  // namespace

std::unique_ptr<ResultSink> make_attention_writer(OutputFile& out,
                                                  std::function<bool(const ReportBatch&, std::size_t)> only) {
  return std::make_unique<AttentionMapWriter>(out, std::move(only));
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
