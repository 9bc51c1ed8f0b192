// ops-reports pinned: every generated value (offsets, features, ids, token names, embedding bits)
// equals a fixture written by the generator before it was vectorised (tests/plugins/data/
// ops_reports_expected.jsonl), and every SIMD level the plugin picks (HEADSEP_SIMD caps it) gives
// the same bytes as the plain path over ragged lengths, names, embeddings and odd chunk sizes.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "headsep/plugin_host.hpp"

namespace fs = std::filesystem;
using namespace headsep;

namespace {

// Restores HEADSEP_SIMD at scope exit (the plugin reads it when an instance is created).
struct SimdCap {
  std::string old;
  bool had = false;
  explicit SimdCap(const char* level) {
    if (const char* v = std::getenv("HEADSEP_SIMD")) had = true, old = v;
    if (level) ::setenv("HEADSEP_SIMD", level, 1);
    else ::unsetenv("HEADSEP_SIMD");
  }
  ~SimdCap() {
    if (had) ::setenv("HEADSEP_SIMD", old.c_str(), 1);
    else ::unsetenv("HEADSEP_SIMD");
  }
};

std::string hex64(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(u));
  return b;
}
std::string hex32(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  char b[16];
  std::snprintf(b, sizeof b, "%08x", u);
  return b;
}

// One JSON line per report: exact bits of every value the generator writes.
void dump(const ReportBatch& b, std::size_t d_model, std::string& out) {
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    out += "{\"report\":" + std::to_string(b.first_report + r);
    if (!b.report_ids.empty()) out += ",\"id\":\"" + b.report_ids[r] + "\"";
    out += ",\"tokens\":[";
    for (std::size_t t = b.token_offset[r]; t < b.token_offset[r + 1]; ++t) {
      out += t == b.token_offset[r] ? "{" : ",{";
      if (!b.token_names.empty()) out += "\"name\":\"" + b.token_names[t] + "\",";
      out += "\"f\":[";
      for (std::size_t f = 0; f < b.features.size(); ++f) out += (f ? ",\"" : "\"") + hex64(b.features[f][t]) + "\"";
      out += "]";
      if (d_model) {
        out += ",\"e\":\"";
        for (std::size_t j = 0; j < d_model; ++j) out += hex32(b.embeddings[t * d_model + j]);
        out += "\"";
      }
      out += "}";
    }
    out += "]}\n";
  }
}

// Reports [first, first + count) of a generator, through random access in chunks of `chunk`
// (first must be a multiple of chunk).
std::string generate(const PluginParams& params, std::uint64_t first, std::uint64_t count, std::uint64_t chunk,
                     const char* simd) {
  SimdCap cap(simd);
  static const auto reg = PluginRegistry::discover({builtin_plugin_dir()});
  auto src = open_scenario_plugin(reg, "ops-reports", params);
  std::size_t d_model = 0;
  for (const auto& [k, v] : params)
    if (k == "d_model") d_model = std::stoul(v);
  std::string out;
  ReportBatch b;
  for (std::uint64_t i = first / chunk; i * chunk < first + count; ++i) {
    REQUIRE(src->fill(i, chunk, b));
    dump(b, d_model, out);
  }
  return out;
}

struct Case {
  PluginParams params;
  std::uint64_t first, count;
};

// The fixture's cases: defaults, the main job's seed at the far end of 10 M reports, ragged
// lengths with names, embeddings with noise.
std::vector<Case> fixture_cases() {
  return {
      {{{"reports", "40"}}, 0, 40},
      {{{"reports", "10000000"}, {"seed", "2026"}}, 9999970, 30},
      {{{"reports", "60"}, {"seed", "-3"}, {"min_tokens", "1"}, {"max_tokens", "11"}, {"names", "true"}}, 0, 60},
      {{{"reports", "12"}, {"seed", "5"}, {"min_tokens", "2"}, {"max_tokens", "4"}, {"d_model", "7"}, {"noise", "0.3"}}, 0, 12},
  };
}

}  // namespace

TEST_CASE("ops-reports: generated values equal the saved fixture", "[plugins][ops-reports]") {
  const fs::path expected_path = fs::path(HEADSEP_SOURCE_DIR) / "tests/plugins/data/ops_reports_expected.jsonl";
  std::string got;
  for (const auto& c : fixture_cases()) got += generate(c.params, c.first, c.count, c.count == 30 ? 10 : c.count, nullptr);
  std::ifstream f(expected_path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  const std::string expected = s.str();
  if (got != expected) {
    // The actual output beside the test binary, to diff against the fixture.
    std::ofstream(fs::current_path() / "ops_reports_actual.jsonl", std::ios::binary) << got;
    FAIL("differs from " << expected_path << "; actual written to " << (fs::current_path() / "ops_reports_actual.jsonl"));
  }
}

TEST_CASE("ops-reports: every SIMD level gives the plain path's bytes", "[plugins][ops-reports][simd]") {
  const std::vector<PluginParams> sets = {
      {{"reports", "1001"}, {"seed", "2026"}},
      {{"reports", "777"}, {"seed", "11"}, {"min_tokens", "1"}, {"max_tokens", "17"}},
      {{"reports", "333"}, {"seed", "0"}, {"min_tokens", "1"}, {"max_tokens", "5"}, {"names", "true"}},
      {{"reports", "129"}, {"seed", "42"}, {"min_tokens", "2"}, {"max_tokens", "9"}, {"d_model", "13"}, {"noise", "1.5"}},
      {{"reports", "65"}, {"seed", "9"}, {"min_tokens", "1"}, {"max_tokens", "1"}},
      {{"reports", "40"}, {"seed", "1"}, {"min_tokens", "40"}, {"max_tokens", "70"}, {"names", "true"}},
  };
  for (const auto& params : sets) {
    const std::uint64_t n = std::stoull(params[0].second);
    const std::string ref = generate(params, 0, n, n, "scalar");
    CHECK_FALSE(ref.empty());
    for (const char* level : {"sse2", "avx2", "avx512", static_cast<const char*>(nullptr)})
      for (std::uint64_t chunk : {1ull, 3ull, 7ull, 16ull, 17ull, 100ull, 1000ull}) {
        INFO("level " << (level ? level : "(best)") << ", chunk " << chunk << ", reports " << n);
        CHECK(generate(params, 0, n, chunk, level) == ref);
      }
  }
}
