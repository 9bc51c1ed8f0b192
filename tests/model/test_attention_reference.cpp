// AttentionPlan against two independent references, at every compiled and supported SIMD level:
//  - PyTorch: the committed fixture (tests/data/make_mha_fixture.py) — torch.nn.MultiheadAttention's
//    own per-head attention weights and output for weights loaded from its own state_dict; 1e-5.
//  - NumPy: tests/model/attention_reference.py, float64, on random schemes (d_k != d_v, biases on
//    and off, with and without W_O, n = 0 and 1, causal, every query mode, ragged reports in one
//    run); 1e-4.
// Tolerances: the plan computes in f32 (projections by sgemm, scores, softmax, A·V accumulated in
// f32), so its error is a few ulps per accumulated term; the fixture's sizes are tiny (d_model 8,
// n <= 5), the random cases reach d_model 24 and n 33.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"
#include "headsep/safetensors.hpp"
#include "test_util.hpp"

using namespace headsep;
using json = nlohmann::json;

namespace {

/// Everything one plan.run() produces for a batch of reports, with the maps and output kept.
struct PlanRun {
  std::vector<float> maps, output;
  std::vector<std::uint64_t> maps_offset, output_offset;
  std::vector<std::uint32_t> nq;
};

PlanRun run_plan(const AttentionPlan& plan, const std::vector<float>& x, const std::vector<std::uint64_t>& token_offset,
                 bool with_output, SimdLevel level) {
  const std::size_t R = token_offset.size() - 1, H = plan.heads(), D = plan.d_model();
  PlanRun pr;
  std::uint64_t mo = 0, oo = 0;
  for (std::size_t r = 0; r < R; ++r) {
    const std::uint64_t n = token_offset[r + 1] - token_offset[r];
    const std::uint32_t nq = plan.config().query == QueryMode::all ? std::uint32_t(n) : (n ? 1 : 0);
    pr.nq.push_back(nq);
    pr.maps_offset.push_back(mo);
    pr.output_offset.push_back(oo);
    mo += (H + 1) * nq * n;
    oo += nq * D;
  }
  pr.maps.assign(mo, -1.0f);
  pr.output.assign(oo, -1.0f);
  // One context axis (a ramp), so the kernels run their usual metric path beside the maps.
  std::vector<float> axis(x.size() / D);
  for (std::size_t t = 0; t < axis.size(); ++t) axis[t] = static_cast<float>(t % 7) - 3.0f;
  const float* axes[1] = {axis.data()};
  const std::size_t pairs = H * (H - 1) / 2;
  std::vector<double> context((H + 1) * R), head_stats((H + 1) * kHeadStats * R),
      pair_stats(std::max<std::size_t>(1, pairs * kPairStats * R));
  AttentionOut out;
  out.context = context.data();
  out.head_stats = head_stats.data();
  out.pair_stats = pair_stats.data();
  out.stride = R;
  out.maps = pr.maps.data();
  out.maps_offset = pr.maps_offset.data();
  if (with_output) {
    out.output = pr.output.data();
    out.output_offset = pr.output_offset.data();
  }
  AttentionScratch scratch;
  plan.run(x.data(), token_offset.data(), R, 1, axes, level, out, scratch);
  return pr;
}

double max_abs_diff(const float* got, const std::vector<double>& want) {
  double m = 0;
  for (std::size_t i = 0; i < want.size(); ++i) m = std::max(m, std::abs(double(got[i]) - want[i]));
  return m;
}

std::vector<double> flat(const json& j) {
  std::vector<double> v;
  if (j.is_array() && !j.empty() && j[0].is_array()) {
    for (const auto& e : j) {
      auto s = flat(e);
      v.insert(v.end(), s.begin(), s.end());
    }
  } else {
    for (const auto& e : j) v.push_back(e.get<double>());
  }
  return v;
}

}  // namespace

TEST_CASE("AttentionPlan matches PyTorch nn.MultiheadAttention on the fixture", "[attention][fixture]") {
  const json ex = json::parse(testutil::read_file(testutil::source_path("tests/data/mha_small_expected.json")));
  const std::uint32_t heads = ex["heads"], D = ex["d_model"];
  AttentionLoadOptions lo;
  lo.baseline = testutil::source_path("tests/data/mha_small_single.safetensors");
  const AttentionWeights w = load_attention_safetensors(testutil::source_path("tests/data/mha_small.safetensors"), heads, lo);
  for (const SimdLevel level : supported_levels()) {
    for (const auto& c : ex["cases"]) {
      const std::size_t n = c["n"];
      const std::string mask = c["mask"];
      INFO("level " << to_string(level) << ", n = " << n << ", mask " << mask);
      AttentionConfig cfg;
      cfg.mask = mask == "causal" ? MaskKind::causal : MaskKind::none;
      const AttentionPlan plan(w, cfg);
      std::vector<float> x;
      for (double v : flat(c["x"])) x.push_back(static_cast<float>(v));
      const PlanRun pr = run_plan(plan, x, {0, n}, true, level);
      // Block 0 is the baseline (the 1-head module's weights), blocks 1..H torch's heads in order.
      CHECK(max_abs_diff(pr.maps.data(), flat(c["single_attn_weights"])) <= 1e-5);
      CHECK(max_abs_diff(pr.maps.data() + n * n, flat(c["attn_weights"])) <= 1e-5);
      CHECK(max_abs_diff(pr.output.data(), flat(c["attn_output"])) <= 1e-5);
      (void)D;
    }
  }
}

TEST_CASE("AttentionPlan matches the NumPy float64 reference", "[attention][numpy]") {
  if (testutil::run_shell("/usr/bin/python3 -c 'import numpy'").status != 0) {
    WARN("/usr/bin/python3 with NumPy is not available: the NumPy reference comparison did not run");
    return;
  }
  struct Scheme {
    std::uint32_t d_model, heads, d_k, d_v;
    bool bias, out_proj;
    MaskKind mask;
    QueryMode query;
    std::int64_t query_index;
  };
  const Scheme schemes[] = {
      {8, 2, 4, 4, true, true, MaskKind::none, QueryMode::all, 0},
      {8, 2, 4, 4, true, true, MaskKind::causal, QueryMode::all, 0},
      {12, 3, 5, 2, true, true, MaskKind::causal, QueryMode::all, 0},
      {6, 1, 6, 6, false, false, MaskKind::none, QueryMode::all, 0},
      {16, 4, 4, 3, true, true, MaskKind::none, QueryMode::last, 0},
      {16, 4, 4, 4, true, false, MaskKind::causal, QueryMode::last, 0},
      {8, 2, 3, 5, false, true, MaskKind::causal, QueryMode::first, 0},
      {8, 2, 4, 4, true, true, MaskKind::none, QueryMode::index, 2},
      {8, 2, 4, 4, true, true, MaskKind::causal, QueryMode::index, -2},
      {8, 2, 4, 4, true, true, MaskKind::causal, QueryMode::index, 100},  // clamped to the last token
      {24, 6, 4, 4, true, true, MaskKind::causal, QueryMode::all, 0},
  };
  testutil::TempDir dir;
  std::mt19937_64 rng(20240607);
  std::uniform_real_distribution<float> wd(-0.5f, 0.5f), xd(-2.0f, 2.0f);
  int index = 0;
  for (const Scheme& s : schemes) {
    const std::uint32_t D = s.d_model, H = s.heads;
    AttentionWeights w;
    w.d_model = D, w.heads = H, w.d_k = s.d_k, w.d_v = s.d_v;
    auto fill = [&](std::vector<float>& v, std::size_t count) {
      v.resize(count);
      for (auto& e : v) e = wd(rng);
    };
    fill(w.w_q, std::size_t(H) * s.d_k * D);
    fill(w.w_k, std::size_t(H) * s.d_k * D);
    fill(w.w_v, std::size_t(H) * s.d_v * D);
    fill(w.s_w_q, std::size_t(D) * D);
    fill(w.s_w_k, std::size_t(D) * D);
    fill(w.s_w_v, std::size_t(D) * D);
    if (s.bias) {
      fill(w.b_q, std::size_t(H) * s.d_k);
      fill(w.b_k, std::size_t(H) * s.d_k);
      fill(w.b_v, std::size_t(H) * s.d_v);
      fill(w.s_b_q, D);
      fill(w.s_b_v, D);  // s_b_k left empty: zero
    }
    if (s.out_proj) {
      fill(w.w_o, std::size_t(D) * H * s.d_v);
      if (s.bias) fill(w.b_o, D);
    }
    // Ragged reports in one run: n = 1 and 0 among them, and one long enough for several tiles.
    const std::vector<std::uint64_t> lengths = {1, 5, 0, 2, 33, 7};
    std::vector<std::uint64_t> off = {0};
    for (auto n : lengths) off.push_back(off.back() + n);
    std::vector<float> x(off.back() * D);
    for (auto& v : x) v = xd(rng);

    AttentionConfig cfg;
    cfg.mask = s.mask;
    cfg.query = s.query;
    cfg.query_index = s.query_index;
    const char* qname[] = {"all", "first", "last", "index"};
    json in = {{"d_model", D}, {"heads", H}, {"d_k", s.d_k}, {"d_v", s.d_v}, {"query", qname[int(s.query)]},
               {"query_index", s.query_index}, {"mask", s.mask == MaskKind::causal ? "causal" : "none"}};
    auto doubles = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    in["w"] = {{"w_q", doubles(w.w_q)},     {"w_k", doubles(w.w_k)},     {"w_v", doubles(w.w_v)},
               {"b_q", doubles(w.b_q)},     {"b_k", doubles(w.b_k)},     {"b_v", doubles(w.b_v)},
               {"w_o", doubles(w.w_o)},     {"b_o", doubles(w.b_o)},     {"s_w_q", doubles(w.s_w_q)},
               {"s_w_k", doubles(w.s_w_k)}, {"s_w_v", doubles(w.s_w_v)}, {"s_b_q", doubles(w.s_b_q)},
               {"s_b_k", doubles(w.s_b_k)}, {"s_b_v", doubles(w.s_b_v)}};
    in["reports"] = json::array();
    for (std::size_t r = 0; r < lengths.size(); ++r)
      in["reports"].push_back({{"n", lengths[r]},
                               {"x", std::vector<double>(x.begin() + off[r] * D, x.begin() + off[r + 1] * D)}});
    const std::string src = dir.file("in" + std::to_string(index) + ".json"), dst = dir.file("out" + std::to_string(index) + ".json");
    ++index;
    testutil::write_file(src, in.dump());
    const auto res = testutil::run_shell("/usr/bin/python3 " + testutil::shell_quote(testutil::source_path("tests/model/attention_reference.py")) +
                                         " " + testutil::shell_quote(src) + " " + testutil::shell_quote(dst));
    INFO(res.err);
    REQUIRE(res.status == 0);
    const json ref = json::parse(testutil::read_file(dst));

    const AttentionPlan plan(w, cfg);
    for (const SimdLevel level : supported_levels()) {
      const PlanRun pr = run_plan(plan, x, off, s.out_proj, level);
      for (std::size_t r = 0; r < lengths.size(); ++r) {
        INFO("scheme D=" << D << " H=" << H << " d_k=" << s.d_k << " d_v=" << s.d_v << " query " << qname[int(s.query)]
                         << " " << s.query_index << (s.mask == MaskKind::causal ? " causal" : "") << ", level "
                         << to_string(level) << ", report " << r << " (n = " << lengths[r] << ")");
        const auto& rr = ref["reports"][r];
        const auto maps = rr["maps"].get<std::vector<double>>();
        REQUIRE(maps.size() == (H + 1) * pr.nq[r] * lengths[r]);
        CHECK(max_abs_diff(pr.maps.data() + pr.maps_offset[r], maps) <= 1e-4);
        if (s.out_proj) {
          const auto o = rr["output"].get<std::vector<double>>();
          REQUIRE(o.size() == pr.nq[r] * D);
          double scale = 1;
          for (double v : o) scale = std::max(scale, std::abs(v));
          CHECK(max_abs_diff(pr.output.data() + pr.output_offset[r], o) <= 1e-4 * scale);
        }
      }
    }
  }
}
