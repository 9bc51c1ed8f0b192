// Helpers shared by the core tests: temp folders, files, running the real CLI.
#pragma once
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace testutil {

namespace fs = std::filesystem;

/// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("headsep-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

struct Result {
  int status = -1;
  std::string out, err;
};

/// Runs a shell command line; captures stdout and stderr.
inline Result run_shell(const std::string& cmdline) {
  TempDir tmp;
  const std::string out = tmp.file("out"), err = tmp.file("err");
  const std::string full = cmdline + " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  int raw = std::system(full.c_str());
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

/// Runs the headsep CLI with the given (already quoted where needed) arguments.
inline Result run_cli(const std::string& args) { return run_shell(shell_quote(HEADSEP_CLI) + " " + args); }

inline std::string source_path(const std::string& rel) { return std::string(HEADSEP_SOURCE_DIR) + "/" + rel; }

}  // namespace testutil
