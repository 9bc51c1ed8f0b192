// headsep — errors that name what is at fault.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace headsep {

/// Base of every error the runtime reports to a user (exit status 1).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input data: the message names the file, the line and, when known, the column.
/// Rendered as "FILE:LINE: column 'COL': WHAT" so editors can jump to it.
class InputError : public Error {
 public:
  InputError(std::string file, std::uint64_t line, std::string column, const std::string& what)
      : Error(render(file, line, column, what)),
        file_(std::move(file)), line_(line), column_(std::move(column)) {}
  const std::string& file() const noexcept { return file_; }
  std::uint64_t line() const noexcept { return line_; }   ///< 1-based; 0 = whole file
  const std::string& column() const noexcept { return column_; }

 private:
  static std::string render(const std::string& file, std::uint64_t line, const std::string& column,
                            const std::string& what) {
    std::string s = file;
    if (line) s.append(":").append(std::to_string(line));
    s.append(": ");
    if (!column.empty()) s.append("column '").append(column).append("': ");
    s.append(what);
    return s;
  }
  std::string file_;
  std::uint64_t line_;
  std::string column_;
};

/// A command-line usage error (exit status 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A run stopped on request (RunOptions::stop, set by the Python module on Ctrl-C); nothing of
/// it is written.
class Interrupted : public Error {
 public:
  using Error::Error;
};

}  // namespace headsep
