// Plugins that fail to load or to start (not a library, no entry symbol, another ABI major,
// missing functions, create failing, throwing or NaN weights, duplicate names), a newer ABI minor
// accepted, the folders searched, and an out-of-tree plugin built against an installed headsep.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "headsep/error.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"
#include "test_plugins.hpp"

namespace fs = std::filesystem;
using namespace headsep;
using namespace plugin_tests;

namespace {
// Runs the CLI with --output into a fresh folder; checks a failure left nothing behind.
Cli run_bad(const std::string& args) {
  TempDir out;
  auto r = cli(args + " -o " + q(out.path / "result.txt"));
  CHECK(r.rc != 0);
  CHECK(out.entries().empty());  // no result.txt, no result.txt.tmp-*
  return r;
}
}  // namespace

TEST_CASE("bad plugins: clear message naming the file, non-zero exit, nothing written", "[plugins][bad]") {
  SECTION("a file that is not a shared library") {
    TempDir d;
    std::ofstream(d.path / "junk.so") << "this is not an ELF file\n";
    auto r = run_bad("run -s junk -w uniform --plugin-dir " + q(d.path));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (d.path / "junk.so").string()));
    CHECK(contains(r.err, "not a loadable shared library: file too short"));  // dlerror's reason, file named once
    CHECK_FALSE(contains(r.err, "): "));  // not Boost's wrapper with its stale errno ("): Bad file descriptor")
    auto l = cli("plugins --plugin-dir " + q(d.path));
    CHECK(l.rc == 0);
    CHECK(contains(l.err, "junk.so"));
  }
  SECTION("a library without the entry symbol") {
    auto r = run_bad("run -s ops-reports -w no-entry --plugin-dir " + q(kCases / "no-entry"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "no-entry" / "no-entry.so").string()));
    CHECK(contains(r.err, "no entry symbol 'headsep_plugin_entry'"));
  }
  SECTION("an ABI major mismatch") {
    auto r = run_bad("run -s ops-reports -w from-the-future --plugin-dir " + q(kCases / "abi-major"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "abi-major" / "from-the-future.so").string()));
    CHECK(contains(r.err, "plugin ABI 99.3"));
    CHECK(contains(r.err, "ABI " + std::to_string(HEADSEP_PLUGIN_ABI_MAJOR) + "." + std::to_string(HEADSEP_PLUGIN_ABI_MINOR)));
    REQUIRE_THROWS_WITH(inspect_plugin(kCases / "abi-major" / "from-the-future.so"), Catch::Contains("99.3"));
  }
  SECTION("a descriptor with a missing required function") {
    auto r = run_bad("run -s ops-reports -w no-weights --plugin-dir " + q(kCases / "missing-fn"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "missing-fn" / "no-weights.so").string()));
    CHECK(contains(r.err, "lacks required descriptor field 'weights'"));
  }
  SECTION("a plugin whose create fails") {
    auto r = run_bad("run -s ops-reports -w create-fails --plugin-dir " + q(kCases / "create-fails"));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, (kCases / "create-fails" / "create-fails.so").string()));
    CHECK(contains(r.err, "create failed: the model file 'weights.bin' does not exist"));
  }
  const auto bad = kCases / "bad-weights";
  const std::string file = (bad / "bad-weights.so").string();
  SECTION("a C++ plugin that throws in its constructor") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=throw-create --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "constructor exploded on purpose"));
  }
  SECTION("a C++ plugin that throws while weighting") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=throw --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "weights() exploded on purpose"));
  }
  SECTION("a weighting scheme that returns NaN") {
    auto r = run_bad("run -s ops-reports -w bad-weights -p mode=nan -p reports=10 --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "report '#1'"));
    CHECK(contains(r.err, "scenario 'bad-weights'"));
    CHECK(contains(r.err, "head1 weight of token 2 is nan"));
  }
  SECTION("a weighting scheme that returns negative weights") {
    auto r = run_bad("run --input " + q(kSeedCsv) + " -w bad-weights -p mode=negative --plugin-dir " + q(bad));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, "report 'proc_valve_lockout', scenario 'balanced_heads'"));
    CHECK(contains(r.err, "is -0.25"));
  }
  SECTION("two plugins with the same name") {
    TempDir d;
    fs::copy_file(fs::path(HEADSEP_BINARY_DIR) / "plugins" / "uniform.so", d.path / "my-uniform.so");
    auto r = run_bad("run -s ops-reports -w uniform --plugin-dir " + q(d.path));
    CHECK(r.rc == 1);
    CHECK(contains(r.err, "two plugins are named 'uniform'"));
    CHECK(contains(r.err, (d.path / "my-uniform.so").string()));
    CHECK(contains(r.err, (fs::path(HEADSEP_BINARY_DIR) / "plugins" / "uniform.so").string()));
  }
  SECTION("an unknown plugin name lists what exists") {
    auto r = run_bad("run -s ops-reports -w nope");
    CHECK(r.rc == 1);
    CHECK(contains(r.err, "no weighting plugin named 'nope'"));
    CHECK(contains(r.err, "axis-focus"));
  }
}

TEST_CASE("a newer ABI minor with a longer descriptor is accepted", "[plugins]") {
  auto info = inspect_plugin(kCases / "newer-minor" / "newer-minor.so");
  CHECK(info.abi_major == 1);
  CHECK(info.abi_minor == HEADSEP_PLUGIN_ABI_MINOR + 7);
  auto r = cli("run -s ops-reports -w newer-minor -p reports=3 --format text --plugin-dir " + q(kCases / "newer-minor"));
  CHECK(r.rc == 0);
  CHECK(contains(r.out, "[newer-minor]"));
}

TEST_CASE("HEADSEP_PLUGIN_PATH is searched, the current directory is not", "[plugins]") {
  auto env = sh("HEADSEP_PLUGIN_PATH=" + q(kCases / "newer-minor") + " " + q(kCli) + " plugins");
  CHECK(contains(env.out, "newer-minor"));
  auto cwd = sh("cd " + q(kCases / "newer-minor") + " && " + q(kCli) + " plugins");
  CHECK_FALSE(contains(cwd.out, "newer-minor"));
}

TEST_CASE("an out-of-tree plugin builds against an installed headsep and runs", "[plugins][install][slow]") {
  TempDir t;
  const auto prefix = t.path / "prefix", build = t.path / "build", drop = t.path / "drop";
  const std::string cmake = HEADSEP_CMAKE_COMMAND;
  auto inst = sh(q(cmake) + " --install " + q(HEADSEP_BINARY_DIR) + " --prefix " + q(prefix));
  INFO(inst.out << inst.err);
  REQUIRE(inst.rc == 0);
  REQUIRE(fs::exists(prefix / "lib" / "headsep" / "plugins" / "ops-reports.so"));
  auto conf = sh(q(cmake) + " -S " + q(std::string(HEADSEP_SOURCE_DIR) + "/examples/plugin-template") + " -B " + q(build) +
                 " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" + q(HEADSEP_CXX_COMPILER) +
                 " -DCMAKE_PREFIX_PATH=" + q(prefix));
  INFO(conf.out << conf.err);
  REQUIRE(conf.rc == 0);
  auto bld = sh(q(cmake) + " --build " + q(build));
  INFO(bld.out << bld.err);
  REQUIRE(bld.rc == 0);
  fs::create_directories(drop);
  fs::copy_file(build / "template-reports.so", drop / "template-reports.so");
  // The installed runtime: its own plugins from <prefix>/lib/headsep/plugins, the new one from --plugin-dir.
  const auto headsep = prefix / "bin" / "headsep";
  auto list = sh(q(headsep) + " plugins --plugin-dir " + q(drop));
  CHECK(contains(list.out, "template-reports"));
  CHECK(contains(list.out, (prefix / "lib" / "headsep" / "plugins" / "axis-focus.so").string()));
  auto run = sh(q(headsep) + " run --plugin-dir " + q(drop) + " -s template-reports -w axis-focus -p reports=3 -p prefix=demo --format text");
  INFO(run.err);
  REQUIRE(run.rc == 0);
  CHECK(contains(run.out, "report_id = 'demo-2'"));
  CHECK(contains(run.out, "tokens = ['decision', 'evidence', 'condition']"));
}
