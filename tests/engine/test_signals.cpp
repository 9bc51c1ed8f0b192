// Interrupts sent to a real running process: every temporary removed, one line, exit 128 + signal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "test_util.hpp"

using namespace testutil;

namespace {

// Starts a long run writing rows to out/rows.csv (stderr to err_path), waits until its
// temporary has data, sends `sig`, returns the exit status.
int interrupt_run(const TempDir& out, const std::string& err_path, int sig) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string rows = out.file("rows.csv"), summary = out.file("s.json");
    ::freopen(err_path.c_str(), "w", stderr);
    ::freopen("/dev/null", "w", stdout);
    ::execl(HEADSEP_CLI, HEADSEP_CLI, "run", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=2000000000",
            "--threads", "1", "--per-report", rows.c_str(), "--summary", summary.c_str(), "--quiet", nullptr);
    ::_exit(127);
  }
  bool started = false;
  for (int i = 0; i < 3000 && !started; ++i) {  // up to 30 s on a loaded machine
    for (const auto& e : fs::directory_iterator(out.path))
      if (e.path().filename().string().rfind("rows.csv.tmp-", 0) == 0 && fs::file_size(e.path()) > 0) started = true;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, sig);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(started);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("SIGINT, SIGTERM and SIGHUP remove every temporary and exit 130 / 143 / 129", "[signals][cli]") {
  for (auto [sig, code, name] : {std::tuple{SIGINT, 130, "SIGINT"}, {SIGTERM, 143, "SIGTERM"}, {SIGHUP, 129, "SIGHUP"}}) {
    DYNAMIC_SECTION(name) {
      TempDir out, logs;
      const int rc = interrupt_run(out, logs.file("err.txt"), sig);
      CHECK(rc == code);
      CHECK(fs::is_empty(out.path));
      const std::string err = read_file(logs.file("err.txt"));
      CHECK(err == std::string("headsep: interrupted by ") + name + "; removed unfinished output\n");
    }
  }
}

TEST_CASE("a closed stdout ends the run quietly and leaves no temporary", "[signals][cli]") {
  TempDir out;
  const std::string pipeline = shell_quote(HEADSEP_CLI) + " run -s ops-reports -w axis-focus -p reports=50000000 --format jsonl --summary " +
                               shell_quote(out.file("s.json")) + " | head -n 2 > /dev/null; echo \"status=${PIPESTATUS[0]}\"";
  auto r = run_shell("bash -c " + shell_quote(pipeline));
  CHECK(r.out.find("status=141") != std::string::npos);
  CHECK(r.err.empty());
  CHECK(fs::is_empty(out.path));
}
