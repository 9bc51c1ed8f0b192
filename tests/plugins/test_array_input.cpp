// Attention over a caller's arrays (array_input.hpp, what Python's headsep.attention runs): batches
// borrow X in place; shapes, offsets, names and finiteness are refused with named messages; and
// the summary and per-report rows equal, byte for byte, `headsep run -s tensor -w qkv` on the same
// arrays written to safetensors files (fixtures built from bytes here).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "headsep/array_input.hpp"
#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "headsep/run.hpp"
#include "headsep/summary.hpp"
#include "plugins/safetensors_bytes.hpp"
#include <nlohmann/json.hpp>

#include "test_util.hpp"

using namespace headsep;
using testutil::bytes_of;
using testutil::safetensors;
using testutil::TempDir;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

const std::vector<std::string> kSeedNames{"decision_axis", "evidence_axis", "condition_axis"};

/// A batch of reports (uniform or ragged), seed-named features, and one MultiheadAttention.
struct Case {
  std::uint32_t d = 8, heads = 2;
  std::vector<std::uint64_t> offsets;  // empty: uniform reports of n tokens
  std::uint64_t n = 5, reports = 6;
  std::vector<float> x, f, in_w, in_b, out_w, out_b, s_w, s_b;
  Case(bool ragged) {
    if (ragged) offsets = {0, 1, 4, 11, 13, 20, 29};
    const std::uint64_t T = ragged ? offsets.back() : reports * n;
    x = random_floats(T * d, 1), f = random_floats(T * 3, 2, 2.0f);
    in_w = random_floats(3 * d * d, 3, 0.5f), in_b = random_floats(3 * d, 4, 0.1f);
    out_w = random_floats(d * d, 5, 0.5f), out_b = random_floats(d, 6, 0.1f);
    s_w = random_floats(3 * d * d, 7, 0.5f), s_b = random_floats(3 * d, 8, 0.1f);
  }
  std::uint64_t tokens() const { return x.size() / d; }
  std::vector<double> features() const { return std::vector<double>(f.begin(), f.end()); }

  ArrayEmbeddings embeddings(const std::vector<double>& feats) const {
    ArrayEmbeddings e;
    e.data = x.data(), e.tokens = tokens(), e.d_model = d;
    if (offsets.empty()) e.uniform = n;
    else e.offsets = offsets;
    e.features = feats.data(), e.n_features = 3, e.feature_names = kSeedNames;
    e.columns = axis_columns(parse_axes(kSeedAxes));  // as `headsep run` asks the tensor plugin
    return e;
  }
  ArrayWeights weights() const {
    ArrayWeights w;
    w.tensors = {{"in_proj_weight", {in_w.data(), {3ull * d, d}}}, {"in_proj_bias", {in_b.data(), {3ull * d}}},
                 {"out_proj.weight", {out_w.data(), {d, d}}}, {"out_proj.bias", {out_b.data(), {d}}}};
    return w;
  }
  ArrayWeights single() const {
    ArrayWeights w;
    w.tensors = {{"in_proj_weight", {s_w.data(), {3ull * d, d}}}, {"in_proj_bias", {s_b.data(), {3ull * d}}},
                 {"out_proj.weight", {out_w.data(), {d, d}}}};
    return w;
  }
  std::string x_file() const {
    std::vector<testutil::Tensor> t;
    if (offsets.empty()) {
      t.push_back({"x", "F32", {reports, n, d}, bytes_of(x)});
    } else {
      std::vector<std::int64_t> o(offsets.begin(), offsets.end());
      t.push_back({"x", "F32", {tokens(), d}, bytes_of(x)});
      t.push_back({"offsets", "I64", {o.size()}, bytes_of(o)});
    }
    t.push_back({"features", "F32", {tokens(), 3}, bytes_of(f)});
    return safetensors(t, {{"features", "decision_axis,evidence_axis,condition_axis"}});
  }
  std::string mha_file(bool baseline) const {
    if (baseline)
      return safetensors({{"in_proj_weight", "F32", {3ull * d, d}, bytes_of(s_w)},
                          {"in_proj_bias", "F32", {3ull * d}, bytes_of(s_b)},
                          {"out_proj.weight", "F32", {d, d}, bytes_of(out_w)}});
    return safetensors({{"in_proj_weight", "F32", {3ull * d, d}, bytes_of(in_w)},
                        {"in_proj_bias", "F32", {3ull * d}, bytes_of(in_b)},
                        {"out_proj.weight", "F32", {d, d}, bytes_of(out_w)},
                        {"out_proj.bias", "F32", {d}, bytes_of(out_b)}});
  }
};

struct Outputs {
  std::string summary, rows;
};

/// The in-memory job: array source + array attention through run() into a Summary and a CSV writer.
Outputs run_arrays(const ArrayEmbeddings& x, const ArrayAttention& a, unsigned threads = 2, std::size_t chunk = 2) {
  auto source = open_array_source(x);
  auto weighting = make_array_attention(a, source->schema());
  const AxisMap axes = AxisMap::bind(parse_axes(kSeedAxes), source->schema().feature_names);
  RunInfo info{axes.names(), weighting->heads()};
  info.attention = true;
  Summary summary(info, SummaryOptions{10, 20, 0.005});
  Outputs out;
  OutputFile rows(&out.rows);
  auto writer = make_writer(Format::csv, rows, info);
  RunOptions opt;
  opt.threads = threads, opt.chunk_reports = chunk, opt.simd = default_level();
  const RunStats st = run(*source, *weighting, axes, opt, {&summary, writer.get()});
  writer->finish(source->rows_read(), st.source_rows);
  out.summary = summary.json();
  return out;
}

}  // namespace

TEST_CASE("array source: batches borrow X in place, reports and columns as the tensor plugin's", "[arrays]") {
  for (const bool ragged : {false, true}) {
    DYNAMIC_SECTION((ragged ? "ragged" : "uniform")) {
      Case c(ragged);
      const auto feats = c.features();
      ArrayEmbeddings e = c.embeddings(feats);
      e.columns = {"evidence_axis", "x[3]"};
      auto src = open_array_source(e);
      CHECK(src->random_access());
      CHECK(src->schema().d_model == c.d);
      CHECK(src->schema().feature_names == std::vector<std::string>{"evidence_axis", "x[3]"});
      CHECK(src->total_reports() == c.reports);
      ReportBatch b;
      std::uint64_t seen = 0;
      for (std::uint64_t i = 0; src->fill(i, 4, b); ++i) {
        CHECK(b.first_report == 4 * i);
        const std::uint64_t t0 = ragged ? c.offsets[4 * i] : 4 * i * c.n;
        // In place: the batch points into the caller's array; no float of X was copied.
        CHECK(b.embeddings.empty());
        CHECK(b.embeddings_view == c.x.data() + t0 * c.d);
        CHECK(b.embedding_data() == c.x.data() + t0 * c.d);
        CHECK(b.embedding_size() == b.n_tokens() * c.d);
        for (std::size_t t = 0; t < b.n_tokens(); ++t) {
          CHECK(b.features[0][t] == double(c.f[(t0 + t) * 3 + 1]));
          CHECK(b.features[1][t] == double(c.x[(t0 + t) * c.d + 3]));
        }
        for (std::size_t r = 0; r < b.n_reports(); ++r)
          CHECK(b.report_length(r) == (ragged ? c.offsets[4 * i + r + 1] - c.offsets[4 * i + r] : c.n));
        CHECK(b.report_ids.empty());  // "#<index>", as the tensor plugin without ids
        seen += b.n_reports();
      }
      CHECK(seen == c.reports);
      b.clear();
      CHECK(b.embeddings_view == nullptr);
    }
  }
}

TEST_CASE("array source: bad shapes, offsets, ids and columns are refused by name", "[arrays]") {
  Case c(true);
  const auto feats = c.features();
  auto refused = [&](auto edit) {
    ArrayEmbeddings e = c.embeddings(feats);
    edit(e);
    std::string kind = "(none)";
    const std::string m = error_of([&] {
      try {
        open_array_source(e);
      } catch (const UsageError&) {
        kind = "usage";
        throw;
      }
    });
    CHECK(kind == "usage");
    return m;
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.offsets[3] = 3; }),
             Contains("x: offsets[3] = 3 after offsets[2] = 4: offsets must increase"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.offsets[2] = 1; }), Contains("report 1 has no tokens"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.offsets.back() = 28; }),
             Contains("offsets[6] = 28, but x has 29 token rows"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.offsets = {1, 29}; }), Contains("offsets[0] = 1, expected 0"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.offsets.clear(); }), Contains("give offsets [B+1]"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.report_ids = {"a"}; }), Contains("1 report ids for 6 reports"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.columns = {"risk"}; }),
             Contains("column 'risk' (asked for by the axes) is not available: the features are decision_axis"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.columns = {"x[8]"}; }), Contains("x[0]..x[7]"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.feature_names = {"a", "a", "b"}; }), Contains("'a' named twice"));
  CHECK_THAT(refused([](ArrayEmbeddings& e) { e.d_model = 0; }), Contains("d_model 0 is not in 1..1048576"));
}

TEST_CASE("array source: a non-finite value names its row, report, token and component", "[arrays]") {
  Case c(true);
  auto feats = c.features();
  c.x[(12 * c.d) + 5] = std::numeric_limits<float>::quiet_NaN();  // report 3 = rows 11..12, token 1
  ArrayEmbeddings e = c.embeddings(feats);
  e.report_ids = {"a", "b", "c", "d", "e", "f"};
  ArrayAttention a;
  a.heads = 2, a.weights = c.weights();
  const std::string m = error_of([&] { run_arrays(e, a); });
  CHECK(m == "x: row 12 (report 'd', token 1), component 5: NaN (values must be finite)");
  c.x[(12 * c.d) + 5] = 0.5f;
  feats[2 * 3 + 2] = -std::numeric_limits<double>::infinity();
  e = c.embeddings(feats);
  CHECK(error_of([&] { run_arrays(e, a); }) ==
        "features: row 2 (report #1, token 1), column 'condition_axis': -inf (values must be finite)");
}

TEST_CASE("array attention: weights refused by tensor name, shape, value and heads", "[arrays]") {
  Case c(false);
  const auto feats = c.features();
  auto src = open_array_source(c.embeddings(feats));
  auto error = [&](auto edit) {
    ArrayAttention a;
    a.heads = 2, a.weights = c.weights();
    edit(a);
    return error_of([&] { make_array_attention(a, src->schema()); });
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(error([&](ArrayAttention& a) { a.weights.tensors["in_proj_weight"].shape = {16, 8}; }),
             Contains("weights: tensor 'in_proj_weight': shape [16, 8], expected [3*d_model, d_model] = [24, 8]"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.weights.tensors["in_proj_bais"] = {c.in_b.data(), {24}}; }),
             Contains("tensor 'in_proj_bais': unexpected tensor"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.weights.tensors["bias_k"] = {c.in_b.data(), {1, 1, 8}}; }),
             Contains("add_bias_kv=True"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.weights.tensors.erase("in_proj_weight"); }),
             Contains("tensor 'in_proj_weight': missing"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.heads = 3; }), Contains("heads = 3 does not divide d_model = 8"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.query = "middle"; }), Contains("query must be 'all', 'first', 'last'"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.weights = {}; }), Contains("weights are required"));
  CHECK_THAT(error([&](ArrayAttention& a) { a.baseline.tensors = {{"in_proj_weight", {c.s_w.data(), {24, 4}}}}; }),
             Contains("baseline: tensor 'in_proj_weight': shape [24, 4]"));
  std::vector<float> bad = c.in_w;
  bad[9] = std::numeric_limits<float>::infinity();
  CHECK(error([&](ArrayAttention& a) { a.weights.tensors["in_proj_weight"].data = bad.data(); }) ==
        "weights: tensor 'in_proj_weight': element [1, 1] is inf (weights must be finite)");
  // Without an output projection the scheme still runs (the metrics do not need one).
  CHECK(error([&](ArrayAttention& a) { a.weights.tensors.erase("out_proj.weight"), a.weights.tensors.erase("out_proj.bias"); }) ==
        "(no error)");
}

TEST_CASE("array attention: summary and rows equal `headsep run -s tensor -w qkv` byte for byte", "[arrays]") {
  TempDir tmp;
  struct Variant {
    const char* name;
    bool ragged;
    std::string query;
    bool causal;
    int baseline;  // 0 none (qkv's seeded rule), 1 arrays, 2 a file
    bool weights_path;
  };
  for (const Variant& v : {Variant{"uniform", false, "all", false, 0, false}, Variant{"ragged causal", true, "all", true, 1, false},
                          Variant{"query last, baseline file", true, "last", false, 2, false},
                          Variant{"query -2, weights file", false, "-2", true, 2, true}}) {
    DYNAMIC_SECTION(v.name) {
      Case c(v.ragged);
      const auto feats = c.features();
      const auto xf = tmp.file("x.safetensors"), wf = tmp.file("mha.safetensors"), sf = tmp.file("single.safetensors");
      testutil::write_file(xf, c.x_file());
      testutil::write_file(wf, c.mha_file(false));
      testutil::write_file(sf, c.mha_file(true));
      const auto sum = tmp.file("s.json"), rows = tmp.file("rows.csv");
      std::string args = "run -q -s tensor -p tensor.path=" + xf + " -w qkv -p qkv.weights=" + wf +
                         " -p qkv.heads=2 -p qkv.query=" + v.query + " -p qkv.causal=" + (v.causal ? "true" : "false") +
                         " --summary " + sum + " --per-report " + rows;
      if (v.baseline) args += " -p qkv.baseline=" + sf;
      const auto r = testutil::run_cli(args);
      REQUIRE(r.status == 0);

      ArrayAttention a;
      a.heads = 2, a.query = v.query, a.causal = v.causal;
      if (v.weights_path) a.weights.path = wf;
      else a.weights = c.weights();
      if (v.baseline == 1) a.baseline = c.single();
      if (v.baseline == 2) a.baseline.path = sf;
      const Outputs got = run_arrays(c.embeddings(feats), a);
      // The CLI's summary also says what ran (schema_version, kind, run: tensor and qkv); the
      // measured part is the same.
      auto cli_sum = nlohmann::ordered_json::parse(testutil::read_file(sum));
      for (const char* k : {"schema_version", "kind", "run"}) cli_sum.erase(k);
      CHECK(nlohmann::ordered_json::parse(got.summary) == cli_sum);
      CHECK(got.rows == testutil::read_file(rows));
      // Threads and chunking change no byte.
      const Outputs one = run_arrays(c.embeddings(feats), a, 1, 64);
      CHECK(one.summary == got.summary);
      CHECK(one.rows == got.rows);
    }
  }
}
