// Property tests: the engine against a straightforward reference on random report sets, and
// the engine's promises (determinism across threads and chunk sizes, SIMD levels, f32).
#include <catch2/catch.hpp>
#include <limits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "headsep/output.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"
#include "headsep/summary.hpp"
#include "test_util.hpp"

using namespace headsep;
using testutil::TempDir;

namespace {

struct Row {
  std::string report, scenario, token;
  std::vector<double> features, weights;  // weights: single, head1..N
};

struct RandomSet {
  std::vector<std::string> feature_names;
  std::uint32_t heads;
  std::vector<Row> rows;
  std::string csv;
};

std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

RandomSet make_set(std::mt19937_64& g) {
  RandomSet s;
  s.heads = std::uint32_t(g() % 5) + 1;
  const int n_features = int(g() % 4) + 1;
  for (int f = 0; f < n_features; ++f) s.feature_names.push_back("f" + std::to_string(f));
  std::uniform_real_distribution<double> feat(-5, 5), w(0, 1);
  static const char* toks[] = {"정지결정", "a,b", "q\"uote", "line\nbreak", "plain", "압력"};
  const int n_reports = int(g() % 40) + 1;
  for (int r = 0; r < n_reports; ++r) {
    const int len = int(g() % 9) + 1, n_scen = int(g() % 3) + 1;
    std::vector<std::vector<double>> f(static_cast<std::size_t>(len));
    std::vector<std::string> names;
    for (int t = 0; t < len; ++t) {
      for (int k = 0; k < n_features; ++k) f[std::size_t(t)].push_back(feat(g));
      names.push_back(toks[g() % 6]);
    }
    for (int sc = 0; sc < n_scen; ++sc)
      for (int t = 0; t < len; ++t) {
        Row row{"rep " + std::to_string(r), "sc" + std::to_string(sc), names[std::size_t(t)], f[std::size_t(t)], {}};
        for (std::uint32_t h = 0; h <= s.heads; ++h) row.weights.push_back(w(g));
        s.rows.push_back(row);
      }
  }
  s.csv = "scenario,token,report_id";
  for (auto& n : s.feature_names) s.csv += "," + n;
  s.csv += ",single_weight";
  for (std::uint32_t h = 1; h <= s.heads; ++h) s.csv += ",head" + std::to_string(h) + "_weight";
  s.csv += "\r\n";
  for (auto& row : s.rows) {
    s.csv += field(row.scenario) + "," + field(row.token) + "," + field(row.report);
    for (double v : row.features) s.csv += "," + fmt(v);
    for (double v : row.weights) s.csv += "," + fmt(v);
    s.csv += "\r\n";
  }
  return s;
}

// Collects every (report, scenario) result as plain vectors.
struct Collect final : ResultSink {
  struct Group {
    std::string report, scenario;
    std::vector<double> ctx, sep_pairs;
    double sep;
  };
  std::vector<Group> groups;
  void consume(const BatchResult& res, SinkPartial*) override {
    for (std::size_t r = 0; r < res.batch->n_reports(); ++r)
      for (std::size_t j = 0; j < res.metrics.size(); ++j) {
        const auto& m = res.metrics[j];
        Group gr{res.batch->report_id(r), *res.scenario_names[j], {}, {}, m.separation[r]};
        for (std::uint32_t h = 0; h <= m.heads; ++h)
          for (std::uint32_t c = 0; c < m.axes; ++c) gr.ctx.push_back(m.ctx(h, c, r));
        for (std::size_t p = 0; p < pair_count(m.heads); ++p) gr.sep_pairs.push_back(m.pair(p, r));
        groups.push_back(gr);
      }
  }
};

struct Setup {
  std::vector<AxisSpec> specs;
  std::unique_ptr<ReportSource> source;
  AxisMap axes;
  std::unique_ptr<Weighting> weighting;
};

Setup open(const std::string& path, const std::string& axes_spec) {
  Setup s;
  s.specs = parse_axes(axes_spec);
  CsvSourceOptions o;
  o.path = path;
  o.features = axis_columns(s.specs);
  s.source = open_csv_source(o);
  s.axes = AxisMap::bind(s.specs, s.source->schema().feature_names);
  s.weighting = make_table_weighting(s.source->schema().given_heads);
  return s;
}

}  // namespace

TEST_CASE("engine matches a straightforward reference on random CSVs (N = 1..5 heads, custom axes)", "[metrics][property]") {
  std::mt19937_64 g(7);
  TempDir dir;
  for (int trial = 0; trial < 40; ++trial) {
    RandomSet set = make_set(g);
    const std::string path = dir.file("set.csv");
    testutil::write_file(path, set.csv);
    // Random axes: each a signed combination of 1..3 feature columns.
    std::string spec;
    std::vector<std::vector<std::pair<std::size_t, double>>> axes;
    const int n_axes = int(g() % 3) + 1;
    for (int a = 0; a < n_axes; ++a) {
      spec += (a ? ";ax" : "ax") + std::to_string(a) + "=";
      axes.emplace_back();
      for (int k = 0, n = int(g() % 3) + 1; k < n; ++k) {
        std::size_t f = g() % set.feature_names.size();
        double coef = (g() % 2) ? 1.0 : -0.5;
        spec += (coef < 0 ? "-0.5*" : (k ? "+" : "")) + set.feature_names[f];
        axes.back().emplace_back(f, coef);
      }
    }
    INFO("trial " << trial << " axes " << spec << " heads " << set.heads);
    Setup s = open(path, spec);
    Collect got;
    RunOptions opt;
    opt.chunk_reports = 1 + g() % 7;
    run(*s.source, *s.weighting, s.axes, opt, {&got});

    // Reference: group rows by (report, scenario) in order, sum in file order.
    std::size_t gi = 0;
    for (std::size_t i = 0; i < set.rows.size();) {
      std::size_t j = i;
      while (j < set.rows.size() && set.rows[j].report == set.rows[i].report && set.rows[j].scenario == set.rows[i].scenario) ++j;
      REQUIRE(gi < got.groups.size());
      const auto& G = got.groups[gi++];
      CHECK(G.report == set.rows[i].report);
      CHECK(G.scenario == set.rows[i].scenario);
      std::vector<std::vector<double>> ctx(set.heads + 1, std::vector<double>(axes.size(), 0.0));
      std::vector<std::vector<double>> mag = ctx;
      for (std::size_t t = i; t < j; ++t)
        for (std::uint32_t h = 0; h <= set.heads; ++h)
          for (std::size_t c = 0; c < axes.size(); ++c) {
            double v = 0;
            for (auto [f, k] : axes[c]) v += k * set.rows[t].features[f];
            ctx[h][c] += set.rows[t].weights[h] * v;
            mag[h][c] += std::fabs(set.rows[t].weights[h] * v);
          }
      for (std::uint32_t h = 0; h <= set.heads; ++h)
        for (std::size_t c = 0; c < axes.size(); ++c)
          CHECK(std::fabs(G.ctx[h * axes.size() + c] - ctx[h][c]) <= 1e-12 * (mag[h][c] + 1e-300));
      double total = 0;
      std::size_t p = 0;
      for (std::uint32_t a = 1; a <= set.heads; ++a)
        for (std::uint32_t b = a + 1; b <= set.heads; ++b, ++p) {
          double d2 = 0;
          for (std::size_t c = 0; c < axes.size(); ++c) d2 += (ctx[a][c] - ctx[b][c]) * (ctx[a][c] - ctx[b][c]);
          CHECK(G.sep_pairs[p] == Approx(std::sqrt(d2)).epsilon(1e-9).margin(1e-12));
          total += std::sqrt(d2);
        }
      CHECK(G.sep == Approx(p ? total / double(p) : 0.0).epsilon(1e-9).margin(1e-12));
      i = j;
    }
    CHECK(gi == got.groups.size());
  }
}

TEST_CASE("output is byte-identical for any thread count and chunk size, SIMD levels agree in f64", "[metrics][determinism]") {
  std::mt19937_64 g(99);
  TempDir dir;
  // A larger uniform-length set so vector paths and several batches are exercised.
  std::string csv = "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight,head3_weight\n";
  std::uniform_real_distribution<double> u(0, 1);
  for (int r = 0; r < 6000; ++r) {  // past 4096: summaries in sketch mode
    std::string feats[3];
    for (auto& f : feats) f = "," + fmt(u(g)) + "," + fmt(u(g)) + "," + fmt(u(g));
    for (const char* sc : {"a", "b"})
      for (int t = 0; t < 3; ++t) {
        csv += "r" + std::to_string(r) + "," + sc + ",t" + std::to_string(t) + feats[t];
        for (int k = 0; k < 4; ++k) csv += "," + fmt(u(g));
        csv += "\n";
      }
  }
  const std::string path = dir.file("det.csv");
  testutil::write_file(path, csv);

  auto render = [&](unsigned threads, std::size_t chunk, SimdLevel level, std::string* summary_json) {
    Setup s = open(path, std::string(kSeedAxes));
    RunInfo info{s.axes.names(), s.weighting->heads()};
    const std::string out_path = dir.file("out.jsonl");
    OutputFile out(out_path);
    auto writer = make_writer(Format::jsonl, out, info);
    Summary summary(info);
    RunOptions opt;
    opt.threads = threads;
    opt.chunk_reports = chunk;
    opt.simd = level;
    run(*s.source, *s.weighting, s.axes, opt, {writer.get(), &summary});
    writer->finish(0, 0);
    out.commit();
    if (summary_json) *summary_json = summary.json();
    return testutil::read_file(out_path);
  };
  std::string sum0;
  const std::string base = render(1, 8192, SimdLevel::scalar, &sum0);
  REQUIRE(base.size() > 100000);
  for (unsigned threads : {1u, 2u, 4u})
    for (std::size_t chunk : {1u, 7u, 256u, 5000u}) {
      std::string sum;
      INFO("threads " << threads << " chunk " << chunk);
      CHECK(render(threads, chunk, SimdLevel::scalar, &sum) == base);
      CHECK(sum == sum0);
    }
  for (SimdLevel level : supported_levels()) {
    INFO("level " << to_string(level));
    CHECK(render(2, 1000, level, nullptr) == base);
  }
}

TEST_CASE("summary aggregates match a direct computation", "[metrics][summary]") {
  TempDir dir;
  const std::string path = testutil::source_path("data/qkv-multihead-report-scenarios.csv");
  Setup s = open(path, std::string(kSeedAxes));
  RunInfo info{s.axes.names(), s.weighting->heads()};
  Summary summary(info, SummaryOptions{2, 4, 0.005});
  Collect all;
  RunOptions opt;
  opt.chunk_reports = 1;
  run(*s.source, *s.weighting, s.axes, opt, {&summary, &all});
  auto j = nlohmann::json::parse(summary.json());
  REQUIRE(j["scenarios"].size() == 3);
  for (const auto& js : j["scenarios"]) {
    std::vector<double> sep;
    std::vector<std::string> ids;
    for (const auto& gr : all.groups)
      if (gr.scenario == js["scenario"]) sep.push_back(gr.sep), ids.push_back(gr.report);
    REQUIRE(js["count"] == sep.size());
    double mean = 0;
    for (double v : sep) mean += v / double(sep.size());
    double var = 0;
    for (double v : sep) var += (v - mean) * (v - mean) / double(sep.size());
    const auto& m = js["metrics"]["head_separation"];
    CHECK(m["mean"].get<double>() == Approx(mean).epsilon(1e-12));
    CHECK(m["std"].get<double>() == Approx(std::sqrt(var)).epsilon(1e-9));
    auto sorted = sep;
    std::sort(sorted.begin(), sorted.end());
    CHECK(m["min"].get<double>() == sorted.front());
    CHECK(m["max"].get<double>() == sorted.back());
    // Four values: p50 is the mean of the middle two (linear interpolation, exact mode).
    CHECK(m["p50"].get<double>() == Approx((sorted[1] + sorted[2]) / 2).epsilon(1e-15));
    CHECK(m["quantiles_exact"] == true);
    std::uint64_t hist_total = 0;
    for (const auto& b : js["head_separation_histogram"]) hist_total += b["count"].get<std::uint64_t>();
    CHECK(hist_total == 4);
    REQUIRE(js["top"].size() == 2);
    CHECK(js["top"][0]["head_separation"].get<double>() == sorted.back());
    auto best = std::max_element(sep.begin(), sep.end()) - sep.begin();
    CHECK(js["top"][0]["report_id"] == ids[std::size_t(best)]);
    CHECK(js["metrics"].contains("diff_head2_evidence_condition_axis"));
  }
}

TEST_CASE("f32 precision agrees with f64 to float accuracy", "[metrics][f32]") {
  const std::string path = testutil::source_path("data/qkv-multihead-report-scenarios.csv");
  Collect a, b;
  {
    Setup s = open(path, std::string(kSeedAxes));
    run(*s.source, *s.weighting, s.axes, RunOptions{}, {&a});
  }
  {
    Setup s = open(path, std::string(kSeedAxes));
    RunOptions opt;
    opt.precision = Precision::f32;
    run(*s.source, *s.weighting, s.axes, opt, {&b});
  }
  REQUIRE(a.groups.size() == b.groups.size());
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    for (std::size_t k = 0; k < a.groups[i].ctx.size(); ++k) CHECK(b.groups[i].ctx[k] == Approx(a.groups[i].ctx[k]).epsilon(1e-5));
    CHECK(b.groups[i].sep == Approx(a.groups[i].sep).epsilon(1e-4));
  }
}

TEST_CASE("a weighting that returns NaN or a negative weight is refused, naming report and scenario", "[metrics][errors]") {
  struct Bad final : Weighting {
    double value;
    explicit Bad(double v) : value(v) {}
    std::uint32_t heads() const override { return 2; }
    std::vector<std::string> own_scenarios() const override { return {"bad_design"}; }
    void weights(const ReportBatch& b, std::uint32_t, WeightBlock& out) const override {
      for (auto& row : out.rows) std::fill(row.begin(), row.end(), 0.5);
      out.rows[2][b.n_tokens() - 1] = value;
    }
  };
  const std::string path = testutil::source_path("data/qkv-multihead-report-scenarios.csv");
  for (double v : {std::nan(""), -0.25, HUGE_VAL, -HUGE_VAL, -std::numeric_limits<double>::denorm_min(), -1e308}) {
    Setup s = open(path, std::string(kSeedAxes));
    Bad bad(v);
    Collect c;
    CHECK_THROWS_WITH(run(*s.source, bad, s.axes, RunOptions{}, {&c}),
                      Catch::Contains("scenario 'bad_design'") && Catch::Contains("head2 weight of token 3") &&
                          Catch::Contains("report 'maint_code_guard'"));
  }
  // Zeros of either sign, 1e100 and the smallest subnormal are weights (>= 0, finite).
  for (double v : {0.0, -0.0, 1e100, std::numeric_limits<double>::denorm_min()}) {
    Setup s = open(path, std::string(kSeedAxes));
    Bad fine(v);
    Collect c;
    CHECK_NOTHROW(run(*s.source, fine, s.axes, RunOptions{}, {&c}));
  }
}
