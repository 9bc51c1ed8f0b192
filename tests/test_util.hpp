// Helpers shared by the core tests: temp folders, files, running the real CLI.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "headsep/error.hpp"

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

/// A summary's text without its run.execution member (docs/SUMMARY.md: what may differ between
/// runs that give the same numbers: command line, start time, threads, ranks, SIMD, batch size);
/// every other byte kept, so identity checks compare the rest byte for byte.
inline std::string summary_text(const std::string& path) {
  std::string text = read_file(path);
  const auto at = text.find("\"execution\": {");
  if (at == std::string::npos) return text;
  const auto end = text.find('}', at);  // the block holds no nested object
  const auto from = text.rfind(',', at);
  return text.erase(from, end + 1 - from);
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
  long peak_kib = 0;  // peak resident set of the child (run_child only)
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

/// What run_child sets up in the child before exec.
struct ChildLimits {
  std::optional<rlim_t> fsize, as;  // RLIMIT_FSIZE, RLIMIT_AS in the child only
  int stdin_fd = -1;                // default: /dev/null
  std::string stdout_path;          // default: captured into Result::out
};

/// Runs the CLI in a forked child (no shell), with limits; exit status (128 + signal when killed),
/// stdout, stderr and the child's peak RSS from wait4's rusage.
inline Result run_child(const std::vector<std::string>& args, const ChildLimits& lim = {}) {
  TempDir io;
  const std::string out = io.file("out"), err = io.file("err");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (lim.fsize) {
      // Ignored, SIGXFSZ stays ignored across exec, so write() fails with EFBIG instead of killing.
      ::signal(SIGXFSZ, SIG_IGN);
      struct rlimit r{*lim.fsize, *lim.fsize};
      ::setrlimit(RLIMIT_FSIZE, &r);
    }
    if (lim.as) {
      struct rlimit r{*lim.as, *lim.as};
      ::setrlimit(RLIMIT_AS, &r);
    }
    const int in = lim.stdin_fd >= 0 ? lim.stdin_fd : ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    if (!::freopen(lim.stdout_path.empty() ? out.c_str() : lim.stdout_path.c_str(), "w", stdout)) ::_exit(126);
    if (!::freopen(err.c_str(), "w", stderr)) ::_exit(126);
    std::vector<char*> argv{const_cast<char*>(HEADSEP_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(HEADSEP_CLI, argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) != pid) throw std::runtime_error("wait4 failed");
  Result r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  r.peak_kib = ru.ru_maxrss;
  return r;
}

/// The message of the headsep::Error `f` throws, or "(no error)": a CHECK_THAT on it then shows
/// that nothing was refused.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const headsep::Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::string source_path(const std::string& rel) { return std::string(HEADSEP_SOURCE_DIR) + "/" + rel; }

}  // namespace testutil
