// Private: a streaming RFC 4180 reader. Reads the file in blocks; memory is one block plus the
// current record, whatever the file size.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace headsep {

class CsvReader {
 public:
  /// A record (one row, all its fields) longer than this is refused with an InputError naming
  /// its line: memory stays bounded whatever the input (a 1 GB field is refused after reading
  /// 16 MiB of it). docs/LIMITS.md.
  static constexpr std::size_t kMaxRecordBytes = std::size_t(16) << 20;

  /// Opens PATH ("-" reads standard input). Throws InputError naming the file.
  explicit CsvReader(std::string path);
  /// Reads in-memory bytes; `name` is used in messages. `block`: bytes read per refill (at least
  /// 4, so a BOM is always whole in the first block); the default is the file reader's 1 MiB, and
  /// tests pass a few bytes to put every record and quote across block boundaries.
  CsvReader(std::string name, std::string_view bytes, std::size_t block = kBlock);
  static constexpr std::size_t kBlock = std::size_t(1) << 20;
  ~CsvReader();
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;

  /// Reads the next record, skipping blank lines. False at end of file.
  /// Throws InputError on an unterminated quote or stray characters around quotes.
  bool next();
  std::size_t size() const noexcept { return ends_.size(); }
  std::string_view operator[](std::size_t i) const noexcept {
    std::size_t b = i ? ends_[i - 1] : 0;
    return std::string_view(record_).substr(b, ends_[i] - b);
  }
  std::uint64_t line() const noexcept { return record_line_; }  ///< line where the record starts
  const std::string& path() const noexcept { return path_; }
  /// The line number of the next byte (a slice of a larger file continues its numbering).
  void set_line(std::uint64_t line) noexcept { line_ = line; }

 private:
  int get() {
    if (pos_ == end_ && !refill()) return EOF;
    return static_cast<unsigned char>(buf_[pos_++]);
  }
  int peek() {
    if (pos_ == end_ && !refill()) return EOF;
    return static_cast<unsigned char>(buf_[pos_]);
  }
  bool refill();
  [[noreturn]] void too_long() const;

  std::string path_;
  std::FILE* file_ = nullptr;
  bool owns_file_ = false;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  std::string record_;
  std::vector<std::size_t> ends_;
  std::uint64_t line_ = 1, record_line_ = 0;
};

}  // namespace headsep
