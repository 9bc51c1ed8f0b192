// headsep — writing results: the seed's text block, JSON lines, CSV; atomic files.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "headsep/run.hpp"

namespace headsep {

/// A destination that never leaves a half-written file: writes go to "PATH.tmp-XXXXXX" in the
/// same folder and commit() renames it over PATH; destroyed without commit(), the temporary is removed.
/// An empty path or "-" means standard output; an existing non-regular file (a device such as
/// /dev/null, a FIFO) is written in place.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(std::string_view bytes);
  void commit();
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  bool direct_ = false;  ///< a device or pipe, written in place
};

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

}  // namespace headsep
