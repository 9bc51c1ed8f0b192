// headsep — writing results: the seed's text block, JSON lines, CSV; atomic files.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "headsep/run.hpp"

namespace headsep {

/// A destination that never leaves a half-written file: writes go to an unnamed file in PATH's
/// folder (O_TMPFILE: it vanishes with the process, even on SIGKILL) that commit() links in as
/// PATH, atomically replacing it; where O_TMPFILE is unsupported (or set_output_temporaries() asks
/// for named ones), to "PATH.tmp-XXXXXX" renamed over PATH. Destroyed without commit(), nothing remains.
/// An empty path or "-" means standard output; an existing non-regular file (a device such as
/// /dev/null, a FIFO) is written in place.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  /// Writes append to *capture, nothing touches the disk; commit() does nothing (a writer used
  /// only to format, runtime/dist/ offset writes).
  explicit OutputFile(std::string* capture) : capture_(capture) {}
  void write(std::string_view bytes);
  void commit();
  const std::string& path() const noexcept { return path_; }
  /// Offset writes (runtime/dist/, one host): the position of the next write; skip() leaves
  /// `bytes` for another process, which opens shared_path() (this process's descriptor of the
  /// unfinished file, or its temporary's name) and writes them at that position before commit().
  std::uint64_t position();
  void skip(std::uint64_t bytes);
  std::string shared_path() const;

 private:
  friend class CommitGroup;
  struct Adopted {};
  explicit OutputFile(Adopted) {}
  void finish_commit();  ///< link_anonymous() or rename: the file gets its name
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  bool direct_ = false;  ///< a device or pipe, written in place
  bool anonymous_ = false;  ///< an O_TMPFILE file: no name until commit()
  std::string* capture_ = nullptr;
  void link_anonymous();
  std::size_t slot_ = std::size_t(-1);  ///< entry in the table of temporaries signals remove
};

/// All outputs of a run appear together or not at all. While a group is alive (one at a time per
/// process: a newer one stacks over an older), OutputFile::commit() only flushes (a full disk fails
/// there) and hands the unfinished file to the group; commit() below then gives every file its
/// name, in the order they were committed. A group destroyed without commit() (the run failed
/// after some outputs were complete) removes them all. Standard output and devices are written
/// in place as before. Main thread only.
class CommitGroup {
 public:
  CommitGroup();
  ~CommitGroup();
  CommitGroup(const CommitGroup&) = delete;
  CommitGroup& operator=(const CommitGroup&) = delete;
  void commit();

 private:
  friend class OutputFile;
  void adopt(OutputFile& file);
  std::vector<std::unique_ptr<OutputFile>> pending_;
  CommitGroup* previous_ = nullptr;
};

/// Every output of a run checked before the run starts, each as (option, path): two options
/// naming the same file (the same path, or one file through links) are a UsageError naming
/// both; then each path's temporary is created and removed (an Error naming the option when its
/// folder is missing or not writable), so the work is not done for nothing. "-" and existing
/// devices or pipes are not probed.
void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs);

/// Standard output for headsep's own data (rows, tables): after protect_stdout(), a private
/// duplicate of the original descriptor 1, while descriptor 1 itself (and `stdout`, which
/// plugins print to) goes to standard error; before it, `stdout`.
std::FILE* data_stdout() noexcept;
/// Call once in main, before any plugin is loaded (docs/PLUGINS.md, "What a plugin may print").
void protect_stdout() noexcept;

/// How an OutputFile keeps an unfinished file out of sight (`--temporaries`, docs/DISTRIBUTED.md).
enum class Temporaries : std::uint8_t {
  /// The default: an unnamed O_TMPFILE file in PATH's folder, linked in at commit(); nothing is
  /// left even when the process is killed (SIGKILL). Named where O_TMPFILE or /proc is missing.
  unnamed,
  /// Always "PATH.tmp-XXXXXX" renamed over PATH: removed on SIGINT, SIGTERM, SIGHUP and by the
  /// destructor, but left behind by SIGKILL.
  named,
};
/// Process-wide: every OutputFile constructed afterwards uses `how` (default: unnamed). Set it
/// before outputs are opened (main does, from --temporaries); files already open keep theirs.
void set_output_temporaries(Temporaries how) noexcept;
/// "unnamed" or "named"; throws UsageError otherwise.
Temporaries parse_temporaries(std::string_view name);

/// SIGINT, SIGTERM, SIGHUP: remove every OutputFile temporary, print one line, exit 128 + signal
/// (130, 143, 129). SIGPIPE (stdout closed, e.g. `| head`): the same, quietly. SIGSEGV, SIGBUS,
/// SIGABRT, SIGFPE, SIGILL: temporaries removed and one line naming the plugin call in flight on
/// the crashing thread, then the default action; exit() called from inside a plugin: one line
/// naming it, exit status 1. Call once in main.
void install_signal_handlers();

enum class Format : std::uint8_t { text, jsonl, csv };
/// "text", "jsonl"/"json", "csv"; throws UsageError otherwise.
Format parse_format(std::string_view name);
/// Format from a file name's extension (.jsonl/.json, .csv, .txt); throws UsageError if unknown.
Format format_from_extension(const std::string& path);

/// Writers buffer and flush to an OutputFile; finish() writes what only the end knows.
class ResultWriter : public ResultSink {
 public:
  /// rows_read: input rows, all reports; rows_selected: rows of the reports written (seed header).
  virtual void finish(std::uint64_t rows_read, std::uint64_t rows_selected) = 0;
};

std::unique_ptr<ResultWriter> make_writer(Format format, OutputFile& out, const RunInfo& info);

/// --attention: JSON lines, one per kept (report, scenario) of an attention scheme (see
/// RunOptions::keep_maps): report_id, report_index, scenario, tokens, queries, the baseline's
/// map ("single": query rows x keys), every head's ("heads"), and the multi-head output
/// concat(O_h) W_O + b_O ("output": query rows x d_model) when the scheme has one. With `only`,
/// just the kept reports it accepts (the run may keep more maps for other sinks: keep_top_maps).
/// `kv_head_of` (a decoder's RunInfo::kv_head_of): each model map line also says which key/value
/// head each of its heads reads ("kv_head_of", after "heads"); empty for BERT and qkv runs.
std::unique_ptr<ResultSink> make_attention_writer(
    OutputFile& out, std::function<bool(const ReportBatch& batch, std::size_t report)> only = {},
    std::vector<std::uint32_t> kv_head_of = {});

}  // namespace headsep
