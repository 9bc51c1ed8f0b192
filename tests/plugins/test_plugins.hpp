// What the test_plugins files share: the CLI and fixture paths, temporary folders, running the
// CLI through the shell, the built-in plugins' registry.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "headsep/plugin_host.hpp"
#include "test_util.hpp"

namespace plugin_tests {

inline const std::string kCli = HEADSEP_CLI;
inline const std::filesystem::path kCases = HEADSEP_TEST_CASES_DIR;
inline const std::string kSeedCsv = std::string(HEADSEP_SOURCE_DIR) + "/data/qkv-multihead-report-scenarios.csv";

// A fresh temporary folder, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() / ("headsep-test-plugins-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(path)) v.push_back(e.path().filename().string());
    return v;
  }
};

inline std::string slurp(const std::filesystem::path& p) { return testutil::read_file(p.string()); }

inline std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

struct Cli {
  int rc = -1;
  std::string out, err;
};

// A shell command line (stdin from /dev/null): exit status, stdout and stderr.
inline Cli sh(const std::string& command) {
  auto r = testutil::run_shell(command);
  return {r.status, std::move(r.out), std::move(r.err)};
}

inline Cli cli(const std::string& args) { return sh(q(kCli) + " " + args); }

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline headsep::PluginRegistry builtins() { return headsep::PluginRegistry::discover({headsep::builtin_plugin_dir()}); }

}  // namespace plugin_tests
