// fail-gen — a scenario generator that fails on purpose at one chunk (fault-injection tests).
// Reports of `tokens` tokens with features x and y; chunk `fail_at` returns an error (or, with
// mode=alloc, throws std::bad_alloc as a plugin running out of memory would). Sequential or
// random access, so both engine paths meet a failure in the middle of a run; a huge `tokens`
// makes one report that the engine cannot hold under a memory limit. `fail_also` fails a second
// chunk at once while `fail_at` first sleeps `delay_ms`: the later chunk fails first in time, and
// the run must still report the earlier one. mode=kill: the process kills itself with SIGKILL (a
// rank of a distributed run dying outright, tests/dist/).
#include <signal.h>

#include <chrono>
#include <new>
#include <string>
#include <thread>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

class FailGen final : public ScenarioGenerator {
 public:
  explicit FailGen(const Params& p)
      : reports_(static_cast<std::uint64_t>(p.get_int("reports"))),
        tokens_(static_cast<std::uint64_t>(p.get_int("tokens"))),
        fail_at_(p.get_int("fail_at")),
        fail_also_(p.get_int("fail_also")),
        delay_ms_(p.get_int("delay_ms")),
        random_(p.get_bool("random_access")),
        mode_(p.get_string("mode")) {
    if (mode_ != "error" && mode_ != "alloc" && mode_ != "kill") throw PluginError("mode must be error, alloc or kill");
  }
  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = {"x", "y"};
    s.scenarios = {"only"};
    s.random_access = random_;
    s.total_reports = reports_;
    return s;
  }
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    if (static_cast<std::int64_t>(index) == fail_also_) throw PluginError("injected failure at chunk " + std::to_string(index));
    if (static_cast<std::int64_t>(index) == fail_at_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      if (mode_ == "alloc") throw std::bad_alloc();
      if (mode_ == "kill") ::raise(SIGKILL);
      throw PluginError("injected failure at chunk " + std::to_string(index));
    }
    const std::uint64_t first = index * max_reports;
    if (first >= reports_) return false;
    const std::uint64_t n = std::min(max_reports, reports_ - first);
    const std::uint64_t L = tokens_;
    auto off = out.token_offsets(n);
    for (std::uint64_t r = 0; r <= n; ++r) off[r] = L * r;
    auto x = out.feature(0, L * n), y = out.feature(1, L * n);
    for (std::uint64_t t = 0; t < L * n; ++t) {
      x[t] = double((first * L + t) % 7);
      y[t] = double((first * L + t) % 5) - 2.0;
    }
    out.source_rows(L * n);
    return true;
  }

 private:
  std::uint64_t reports_, tokens_;
  std::int64_t fail_at_, fail_also_, delay_ms_;
  bool random_;
  std::string mode_;
};

constexpr headsep_param_spec kParams[] = {
    {"reports", HEADSEP_PARAM_INT, "1000", "reports to generate"},
    {"tokens", HEADSEP_PARAM_INT, "3", "tokens per report"},
    {"fail_at", HEADSEP_PARAM_INT, "-1", "chunk index that fails (-1: none)"},
    {"fail_also", HEADSEP_PARAM_INT, "-1", "a second chunk that fails, without delay (-1: none)"},
    {"delay_ms", HEADSEP_PARAM_INT, "0", "sleep before failing at fail_at"},
    {"random_access", HEADSEP_PARAM_BOOL, "false", "declare random access (chunks generated on worker threads)"},
    {"mode", HEADSEP_PARAM_STRING, "error", "error: return an error; alloc: throw std::bad_alloc; kill: SIGKILL this process"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(FailGen, "fail-gen", "1.0.0", "Fault injection: fails at one chunk", kParams)
