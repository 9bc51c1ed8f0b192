// Interrupts sent to a real running process: every temporary removed, one line, exit 128 + signal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <thread>

#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

// Starts a long run writing rows to out/rows.csv (stderr to err_path; --temporaries `temporaries`),
// waits until its unfinished output has data, sends `sig`, returns the exit status.
int interrupt_run(const TempDir& out, const std::string& err_path, int sig, bool* killed = nullptr,
                  const char* temporaries = "unnamed") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string rows = out.file("rows.csv"), summary = out.file("s.json");
    ::freopen(err_path.c_str(), "w", stderr);
    ::freopen("/dev/null", "w", stdout);
    ::execl(HEADSEP_CLI, HEADSEP_CLI, "run", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=2000000000",
            "--threads", "1", "--per-report", rows.c_str(), "--summary", summary.c_str(), "--quiet", "--temporaries",
            temporaries, nullptr);
    ::_exit(127);
  }
  bool started = false;
  for (int i = 0; i < 3000 && !started; ++i) {  // up to 30 s on a loaded machine
    // The output is an unnamed file in out/ (O_TMPFILE) or out/rows.csv.tmp-*: either way an
    // open descriptor of the child that points into out/ and holds data.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      const auto target = fs::read_symlink(e.path(), ec).string();
      if (!ec && target.rfind(out.path.string() + "/", 0) == 0 && fs::file_size(e.path(), ec) > 0 && !ec) started = true;
    }
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, sig);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(started);
  if (killed) {
    *killed = WIFSIGNALED(status) && WTERMSIG(status) == sig;
    return 0;
  }
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

TEST_CASE("named temporaries (--temporaries named) are removed on SIGTERM, and a bad value is a usage error", "[signals][cli]") {
  TempDir out, logs;
  CHECK(interrupt_run(out, logs.file("err.txt"), SIGTERM, nullptr, "named") == 143);
  CHECK(fs::is_empty(out.path));
  CHECK(read_file(logs.file("err.txt")) == "headsep: interrupted by SIGTERM; removed unfinished output\n");
  auto r = run_cli("run -s ops-reports -w axis-focus -p reports=10 --quiet --temporaries hidden");
  CHECK(r.status == 2);
  CHECK(r.err == "headsep: --temporaries: expected unnamed or named, got 'hidden'\n");
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

// SIGKILL runs no handler: the unnamed output (O_TMPFILE) vanishes with the process. This is what
// mpirun does to every rank 1 s after a rank dies (docs/DISTRIBUTED.md).
TEST_CASE("SIGKILL leaves no output and no temporary behind", "[signals][cli]") {
  TempDir out, logs;
  bool killed = false;
  interrupt_run(out, logs.file("err.txt"), SIGKILL, &killed);
  CHECK(killed);
  CHECK(fs::is_empty(out.path));
}

// OutputFile's contract in both of its ways (unnamed file + link, named temporary + rename):
// nothing visible before commit(), an existing file replaced only at commit(), 0644, nothing left
// when destroyed uncommitted.
TEST_CASE("OutputFile: invisible until commit, atomic replace, both ways", "[output]") {
  for (const char* mode : {"unnamed", "named"}) {
    DYNAMIC_SECTION("--temporaries " << mode) {
      headsep::set_output_temporaries(headsep::parse_temporaries(mode));
      TempDir dir;
      const std::string fresh = dir.file("fresh.txt"), old = dir.file("old.txt");
      testutil::write_file(old, "old contents\n");
      auto names = [&] {
        std::vector<std::string> v;
        for (const auto& e : fs::directory_iterator(dir.path)) v.push_back(e.path().filename().string());
        std::sort(v.begin(), v.end());
        return v;
      };
      {
        headsep::OutputFile a(fresh), b(old);
        a.write("new A\n");
        b.write("new B\n");
        if (std::string(mode) == "unnamed") CHECK(names() == std::vector<std::string>{"old.txt"});
        else CHECK(names().size() == 3);  // old.txt and two named temporaries
        CHECK(read_file(old) == "old contents\n");
        a.commit();
        b.commit();
      }
      CHECK(names() == (std::vector<std::string>{"fresh.txt", "old.txt"}));
      CHECK(read_file(fresh) == "new A\n");
      CHECK(read_file(old) == "new B\n");
      CHECK((fs::status(fresh).permissions() & fs::perms::all) ==
            (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
      {
        headsep::OutputFile c(old), d(dir.file("never.txt"));
        c.write("lost\n");
        d.write("lost\n");
      }
      CHECK(names() == (std::vector<std::string>{"fresh.txt", "old.txt"}));
      CHECK(read_file(old) == "new B\n");
      CHECK_THROWS_AS(headsep::OutputFile(dir.file("missing/x.txt")), headsep::Error);
      headsep::set_output_temporaries(headsep::Temporaries::unnamed);
    }
  }
}
