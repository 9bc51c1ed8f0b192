#include "io/csv_reader.hpp"

#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "headsep/error.hpp"

namespace headsep {

CsvReader::CsvReader(std::string path) : path_(std::move(path)), buf_(kBlock) {
  if (path_ == "-") {
    file_ = stdin;
  } else {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) throw InputError(path_, 0, "", std::string("cannot open: ") + std::strerror(errno));
    owns_file_ = true;
    // fopen opens a folder for reading on Linux; its first read fails with EISDIR. Say so up front.
    struct stat st {};
    if (::fstat(::fileno(file_), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::fclose(file_), file_ = nullptr, owns_file_ = false;
      throw InputError(path_, 0, "", "cannot open: it is a folder, not a CSV file");
    }
  }
  // A UTF-8 byte order mark is not part of the first column's name.
  if (refill() && end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
}

// The block never exceeds the input (plus one byte, so the first refill sees the end): in-memory
// reads of small inputs do not allocate and clear 1 MiB each.
CsvReader::CsvReader(std::string name, std::string_view bytes, std::size_t block)
    : path_(std::move(name)), buf_(std::clamp<std::size_t>(std::min(block, bytes.size() + 1), 4, kBlock)) {
  file_ = ::fmemopen(const_cast<char*>(bytes.data()), bytes.size(), "rb");
  if (!file_) throw InputError(path_, 0, "", std::string("cannot open: ") + std::strerror(errno));
  owns_file_ = true;
  if (refill() && end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
}

CsvReader::~CsvReader() {
  if (owns_file_) std::fclose(file_);
}

bool CsvReader::refill() {
  pos_ = 0;
  end_ = std::fread(buf_.data(), 1, buf_.size(), file_);
  if (end_ == 0 && std::ferror(file_))
    throw InputError(path_, line_, "", std::string("read error: ") + std::strerror(errno));
  return end_ > 0;
}

void CsvReader::too_long() const {
  throw InputError(path_, record_line_, "",
                   "row of more than " + std::to_string(kMaxRecordBytes >> 20) + " MiB (field " + std::to_string(ends_.size() + 1) +
                       "); rows are limited to " + std::to_string(kMaxRecordBytes >> 20) + " MiB (docs/LIMITS.md)");
}

bool CsvReader::next() {
  record_.clear();
  ends_.clear();
  int c = get();
  // Blank lines (LF or CRLF) between records are skipped, as Python's csv module does.
  while (c == '\n' || c == '\r') {
    if (c == '\r' && peek() == '\n') get();
    ++line_;
    c = get();
  }
  if (c == EOF) return false;
  record_line_ = line_;
  for (;;) {
    if (c == '"') {
      const std::uint64_t open_line = line_;
      for (;;) {
        c = get();
        if (c == EOF)
          throw InputError(path_, open_line, "",
                           "unterminated quoted field (field " + std::to_string(ends_.size() + 1) + " opens a quote that never closes)");
        if (c == '"') {
          if (peek() != '"') break;
          get();
        } else if (c == '\n') {
          ++line_;
        }
        record_ += static_cast<char>(c);
        if (record_.size() > kMaxRecordBytes) too_long();
      }
      c = get();
      if (c != ',' && c != '\n' && c != '\r' && c != EOF)
        throw InputError(path_, line_, "",
                         "unexpected character after the closing quote of field " + std::to_string(ends_.size() + 1));
    } else if (c != ',' && c != '\n' && c != '\r' && c != EOF) {
      // Unquoted field: copy whole runs of ordinary bytes straight from the block.
      record_ += static_cast<char>(c);
      for (;;) {
        const char* p = buf_.data() + pos_;
        const char* e = buf_.data() + end_;
        const char* q = p;
        while (q < e && *q != ',' && *q != '\n' && *q != '\r' && *q != '"') ++q;
        record_.append(p, static_cast<std::size_t>(q - p));
        pos_ = static_cast<std::size_t>(q - buf_.data());
        if (record_.size() > kMaxRecordBytes) too_long();
        if (q < e || !refill()) break;
      }
      c = get();
      if (c == '"')
        throw InputError(path_, line_, "",
                         "quote inside unquoted field " + std::to_string(ends_.size() + 1) + " (quote the whole field and double the quote)");
    }
    ends_.push_back(record_.size());
    if (c == ',') {
      c = get();
      continue;
    }
    if (c == '\r' && peek() == '\n') get();
    if (c != EOF) ++line_;
    return true;
  }
}

}  // namespace headsep
