// The attention-weight loader (load_attention_safetensors): hand-built files in both layouts
// (safetensors_files.hpp), and the torch fixture (tests/data/make_mha_fixture.py) checks it
// against what PyTorch itself saved.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "model/safetensors_files.hpp"
#include "test_util.hpp"

using namespace headsep;
using namespace safetensors_test;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using json = nlohmann::json;

namespace {

/// Rows [r0, r1) of a row-major matrix with `cols` columns.
std::vector<float> rows(const std::vector<float>& m, std::size_t cols, std::size_t r0, std::size_t r1) {
  return {m.begin() + std::ptrdiff_t(r0 * cols), m.begin() + std::ptrdiff_t(r1 * cols)};
}

}  // namespace

TEST_CASE("attention loader: torch's nn.MultiheadAttention state_dict, exactly", "[safetensors][fixture]") {
  const json ex = load_json("tests/data/mha_small_expected.json");
  const auto& t = ex["tensors"];
  const auto& s = ex["single_tensors"];
  const std::size_t e = ex["d_model"].get<std::size_t>();
  const auto in_w = floats(t["in_proj_weight"]["data"]), in_b = floats(t["in_proj_bias"]["data"]);
  const auto file = testutil::source_path("tests/data/mha_small.safetensors");
  const auto base = testutil::source_path("tests/data/mha_small_single.safetensors");

  const AttentionWeights w = load_attention_safetensors(file, 2, {.baseline = base});
  CHECK(w.d_model == e);
  CHECK(w.heads == 2);
  CHECK(w.d_k == e / 2);
  CHECK(w.d_v == e / 2);
  CHECK(w.w_q == rows(in_w, e, 0, e));
  CHECK(w.w_k == rows(in_w, e, e, 2 * e));
  CHECK(w.w_v == rows(in_w, e, 2 * e, 3 * e));
  CHECK(w.b_q == rows(in_b, 1, 0, e));
  CHECK(w.b_k == rows(in_b, 1, e, 2 * e));
  CHECK(w.b_v == rows(in_b, 1, 2 * e, 3 * e));
  CHECK(w.w_o == floats(t["out_proj.weight"]["data"]));
  CHECK(w.b_o == floats(t["out_proj.bias"]["data"]));
  const auto s_w = floats(s["in_proj_weight"]["data"]), s_b = floats(s["in_proj_bias"]["data"]);
  CHECK(w.s_w_q == rows(s_w, e, 0, e));
  CHECK(w.s_w_k == rows(s_w, e, e, 2 * e));
  CHECK(w.s_w_v == rows(s_w, e, 2 * e, 3 * e));
  CHECK(w.s_b_q == rows(s_b, 1, 0, e));
  CHECK(w.s_b_k == rows(s_b, 1, e, 2 * e));
  CHECK(w.s_b_v == rows(s_b, 1, 2 * e, 3 * e));
  CHECK(w.w_q != w.s_w_q);

  // Without a baseline file the s_* stay empty for the caller to fill.
  const AttentionWeights nb = load_attention_safetensors(file, 4);
  CHECK(nb.d_k == 2);
  CHECK(nb.w_q == w.w_q);
  CHECK(nb.s_w_q.empty());
  CHECK(nb.s_b_v.empty());

  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 3); }),
             Equals(file + ": heads = 3 does not divide d_model = 8"));
  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 0); }), Contains("the number of heads is not stored"));
  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 2, {.d_model = 16}); }),
             Equals(file + ": tensor 'in_proj_weight': shape [24, 8], expected [3*d_model, d_model] = [48, 16]"));
  // The baseline file is checked against the main file's d_model, and must be an MHA state_dict.
  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 2, {.baseline = testutil::source_path("tests/data/mha_small_dtypes.safetensors")}); }),
             Contains("mha_small_dtypes.safetensors: baseline: expected a 1-head nn.MultiheadAttention state_dict"));
}

TEST_CASE("attention loader: the fixture rewritten in the per-head layout loads the same weights",
          "[safetensors][fixture]") {
  // As docs/SAFETENSORS.md converts an nn.MultiheadAttention: head h = rows [i*d + h*d_k, ...) of in_proj.
  Files f;
  const SafeTensors mha(testutil::source_path("tests/data/mha_small.safetensors"));
  const SafeTensors one(testutil::source_path("tests/data/mha_small_single.safetensors"));
  const std::size_t d = 8, heads = 2, dk = 4;
  const auto W = mha.read_f32("in_proj_weight"), b = mha.read_f32("in_proj_bias");
  const auto sW = one.read_f32("in_proj_weight"), sb = one.read_f32("in_proj_bias");
  std::vector<T> ts;
  const char* qkv[] = {"q", "k", "v"};
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < 3; ++i) {
      const std::size_t r0 = i * d + h * dk;
      const std::string p = "heads." + std::to_string(h) + "." + qkv[i];
      ts.push_back(f32(p + ".weight", {dk, d}, rows(W, d, r0, r0 + dk)));
      ts.push_back(f32(p + ".bias", {dk}, rows(b, 1, r0, r0 + dk)));
    }
  ts.push_back(f32("out.weight", {d, d}, mha.read_f32("out_proj.weight")));
  ts.push_back(f32("out.bias", {d}, mha.read_f32("out_proj.bias")));
  for (std::size_t i = 0; i < 3; ++i) {
    ts.push_back(f32(std::string("single.") + qkv[i] + ".weight", {d, d}, rows(sW, d, i * d, (i + 1) * d)));
    ts.push_back(f32(std::string("single.") + qkv[i] + ".bias", {d}, rows(sb, 1, i * d, (i + 1) * d)));
  }
  const auto a = load_attention_safetensors(f.put("per_head.safetensors", build(ts)), 0);
  const auto m = load_attention_safetensors(testutil::source_path("tests/data/mha_small.safetensors"), 2,
                                            {.baseline = testutil::source_path("tests/data/mha_small_single.safetensors")});
  CHECK(a.heads == m.heads);
  CHECK(a.d_k == m.d_k);
  CHECK(a.d_v == m.d_v);
  for (auto field : {&AttentionWeights::w_q, &AttentionWeights::w_k, &AttentionWeights::w_v, &AttentionWeights::b_q,
                     &AttentionWeights::b_k, &AttentionWeights::b_v, &AttentionWeights::w_o, &AttentionWeights::b_o,
                     &AttentionWeights::s_w_q, &AttentionWeights::s_w_k, &AttentionWeights::s_w_v,
                     &AttentionWeights::s_b_q, &AttentionWeights::s_b_k, &AttentionWeights::s_b_v})
    CHECK(a.*field == m.*field);
}

TEST_CASE("attention loader: MHA layout from hand-built files", "[safetensors]") {
  Files f;
  SECTION("wrong shape vs d_model names the formula") {
    const auto p = f.put("mha.safetensors", build({f32r("in_proj_weight", {24, 8}, 0), f32r("in_proj_bias", {48}, 1),
                                                   f32r("out_proj.weight", {16, 16}, 2), f32r("out_proj.bias", {16}, 3)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(p, 2); }),
               Equals(p + ": tensor 'in_proj_weight': shape [24, 8], expected [3*d_model, d_model] = [48, 16]"));
    const auto q = f.put("mha2.safetensors", build({f32r("in_proj_weight", {24, 8}, 0), f32r("in_proj_bias", {24}, 1),
                                                    f32r("out_proj.weight", {8, 8}, 2), f32r("out_proj.bias", {7}, 3)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(q, 2); }),
               Equals(q + ": tensor 'out_proj.bias': shape [7], expected [d_model] = [8]"));
  }
  SECTION("missing, unexpected, unsupported and non-finite tensors") {
    const auto p = f.put("a.safetensors", build({f32r("in_proj_weight", {12, 4}, 0)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(p, 2); }),
               Equals(p + ": tensor 'out_proj.weight': missing (nn.MultiheadAttention layout)"));
    const auto q = f.put("b.safetensors", build({f32r("in_proj_weight", {12, 4}, 0), f32r("out_proj.weight", {4, 4}, 1),
                                                 f32r("out_proj.weights", {4}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(q, 2); }),
               Contains("tensor 'out_proj.weights': unexpected tensor (not part of the nn.MultiheadAttention layout"));
    const auto r = f.put("c.safetensors", build({f32r("in_proj_weight", {12, 4}, 0), f32r("out_proj.weight", {4, 4}, 1),
                                                 f32r("bias_k", {1, 1, 4}, 1), f32r("bias_v", {1, 1, 4}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(r, 2); }), Contains("tensor 'bias_k': add_bias_kv=True"));
    auto w = ramp(48, 0);
    w[17] = std::numeric_limits<float>::infinity();
    const auto s = f.put("d.safetensors", build({f32("in_proj_weight", {12, 4}, w), f32r("out_proj.weight", {4, 4}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(s, 2); }),
               Equals(s + ": tensor 'in_proj_weight': element [4, 1] is inf (weights must be finite)"));
    const auto u = f.put("e.safetensors", build({{"in_proj_weight", "I32", {12, 4}, std::string(192, '\0')},
                                                 f32r("out_proj.weight", {4, 4}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(u, 2); }), Contains("tensor 'in_proj_weight': dtype I32"));
    const auto v = f.put("f.safetensors", build({f32r("w", {4}, 0)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(v, 2); }),
               Contains("no attention weights: expected 'in_proj_weight' (nn.MultiheadAttention) or 'heads.0.q.weight'"));
  }
  SECTION("bias=False: no in_proj_bias, no out_proj.bias") {
    const auto p = f.put("nb.safetensors", build({f32r("in_proj_weight", {12, 4}, 0), f32r("out_proj.weight", {4, 4}, 1)}));
    const auto w = load_attention_safetensors(p, 1);
    CHECK(w.d_k == 4);
    CHECK(w.b_q.empty());
    CHECK(w.b_v.empty());
    CHECK(w.b_o.empty());
    CHECK(w.w_v == rows(ramp(48, 0), 4, 8, 12));
  }
  SECTION("q/k/v_proj_weight (the kdim/vdim variant with kdim = vdim = d_model)") {
    const auto p = f.put("sep.safetensors", build({f32r("q_proj_weight", {4, 4}, 0), f32r("k_proj_weight", {4, 4}, 1),
                                                   f32r("v_proj_weight", {4, 4}, 2), f32r("in_proj_bias", {12}, 3),
                                                   f32r("out_proj.weight", {4, 4}, 4), f32r("out_proj.bias", {4}, 5)}));
    const auto w = load_attention_safetensors(p, 2);
    CHECK(w.w_q == ramp(16, 0));
    CHECK(w.w_k == ramp(16, 1));
    CHECK(w.w_v == ramp(16, 2));
    CHECK(w.b_v == rows(ramp(12, 3), 1, 8, 12));
    const auto q = f.put("kdim.safetensors", build({f32r("q_proj_weight", {4, 4}, 0), f32r("k_proj_weight", {4, 6}, 1),
                                                    f32r("v_proj_weight", {4, 4}, 2), f32r("out_proj.weight", {4, 4}, 4)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(q, 2); }),
               Contains("tensor 'k_proj_weight': shape [4, 6], expected [d_model, kdim = d_model] = [4, 4]"));
  }
  SECTION("a module inside a bigger state_dict, by prefix") {
    const std::string pre = "encoder.layers.0.self_attn.";
    const auto p = f.put("model.safetensors",
                         build({f32r(pre + "in_proj_weight", {12, 4}, 0), f32r(pre + "out_proj.weight", {4, 4}, 1),
                                f32r("encoder.layers.0.linear1.weight", {4, 4}, 2), f32r("in_proj_weight", {3, 3}, 3)}));
    const auto w = load_attention_safetensors(p, 2, {.prefix = pre});
    CHECK(w.w_o == ramp(16, 1));
    // Without the prefix, the other module's tensors are not part of the layout.
    CHECK_THAT(error_of([&] { load_attention_safetensors(p, 2); }),
               Contains("tensor 'encoder.layers.0.linear1.weight': unexpected tensor"));
    const auto q = f.put("typo.safetensors", build({f32r("in_proj_weight", {12, 4}, 0), f32r("out_proj.weights", {4, 4}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(q, 2); }), Contains("tensor 'out_proj.weights': unexpected tensor"));
  }
  SECTION("baseline file of another d_model") {
    const auto p = f.put("m.safetensors", build({f32r("in_proj_weight", {12, 4}, 0), f32r("out_proj.weight", {4, 4}, 1)}));
    const auto b = f.put("s.safetensors", build({f32r("in_proj_weight", {24, 8}, 0), f32r("out_proj.weight", {8, 8}, 1)}));
    CHECK_THAT(error_of([&] { load_attention_safetensors(p, 2, {.baseline = b}); }),
               Equals(b + ": tensor 'in_proj_weight': shape [24, 8], expected [3*d_model, d_model] = [12, 4]"));
  }
}

TEST_CASE("attention loader: per-head layout", "[safetensors]") {
  Files f;
  // heads = 3, d_model = 4, d_k = 2, d_v = 3; biases on some heads only; an output projection; a baseline.
  std::vector<T> ts;
  for (int h = 0; h < 3; ++h) {
    const std::string p = "heads." + std::to_string(h) + ".";
    ts.push_back(f32r(p + "q.weight", {2, 4}, 10.0f * h + 1));
    ts.push_back(f32r(p + "k.weight", {2, 4}, 10.0f * h + 2));
    ts.push_back(f32r(p + "v.weight", {3, 4}, 10.0f * h + 3));
    if (h != 1) ts.push_back(f32r(p + "q.bias", {2}, 10.0f * h + 4));
  }
  ts.push_back(f32r("out.weight", {4, 9}, 40));
  ts.push_back(f32r("out.bias", {4}, 41));
  for (const char* p : {"q", "k", "v"}) ts.push_back(f32r(std::string("single.") + p + ".weight", {4, 4}, 50));
  ts.push_back(f32r("single.v.bias", {4}, 51));
  const auto file = f.put("ph.safetensors", build(ts));

  const auto w = load_attention_safetensors(file, 0);  // heads counted from the names
  CHECK(w.heads == 3);
  CHECK(w.d_model == 4);
  CHECK(w.d_k == 2);
  CHECK(w.d_v == 3);
  REQUIRE(w.w_q.size() == 3 * 2 * 4);
  REQUIRE(w.w_v.size() == 3 * 3 * 4);
  for (int h = 0; h < 3; ++h) {
    CHECK(rows(w.w_q, 4, 2 * h, 2 * h + 2) == ramp(8, 10.0f * h + 1));
    CHECK(rows(w.w_k, 4, 2 * h, 2 * h + 2) == ramp(8, 10.0f * h + 2));
    CHECK(rows(w.w_v, 4, 3 * h, 3 * h + 3) == ramp(12, 10.0f * h + 3));
  }
  CHECK(w.b_q == std::vector<float>{4, 4 + 1 / 64.0f, 0, 0, 24, 24 + 1 / 64.0f});  // head 1 has no bias: zero
  CHECK(w.b_k.empty());
  CHECK(w.w_o == ramp(36, 40));
  CHECK(w.b_o == ramp(4, 41));
  CHECK(w.s_w_k == ramp(16, 50));
  CHECK(w.s_b_v == ramp(4, 51));
  CHECK(w.s_b_q.empty());
  CHECK(load_attention_safetensors(file, 3).w_q == w.w_q);

  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 2); }),
             Contains("tensor 'heads.2.k.weight': unexpected tensor (not part of the per-head layout; see "
                      "docs/SAFETENSORS.md); heads = 2 reads heads.0 .. heads.1"));
  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 4); }),
             Equals(file + ": tensor 'heads.3.q.weight': missing (per-head layout)"));
  CHECK_THAT(error_of([&] { load_attention_safetensors(file, 0, {.baseline = file}); }),
             Contains("has single.* baseline tensors and a baseline file was given too"));

  SECTION("shapes are checked against d_k, d_v, d_model and heads") {
    auto bad = ts;
    bad[5] = f32r("heads.1.k.weight", {3, 4}, 0);  // d_k = 2
    CHECK_THAT(error_of([&] { load_attention_safetensors(f.put("b1.safetensors", build(bad)), 0); }),
               Contains("tensor 'heads.1.k.weight': shape [3, 4], expected [d_k, d_model] = [2, 4]"));
    bad = ts;
    bad[bad.size() - 6] = f32r("out.weight", {4, 6}, 0);
    CHECK_THAT(error_of([&] { load_attention_safetensors(f.put("b2.safetensors", build(bad)), 0); }),
               Contains("tensor 'out.weight': shape [4, 6], expected [d_model, heads*d_v] = [4, 9]"));
    bad = ts;
    bad.erase(bad.end() - 2);  // single.v.weight
    CHECK_THAT(error_of([&] { load_attention_safetensors(f.put("b3.safetensors", build(bad)), 0); }),
               Contains("tensor 'single.v.weight': missing (per-head layout)"));
    bad = ts;
    bad.erase(bad.end() - 6);  // out.weight, keeping out.bias
    CHECK_THAT(error_of([&] { load_attention_safetensors(f.put("b4.safetensors", build(bad)), 0); }),
               Contains("tensor 'out.bias': given without out.weight"));
    CHECK_THAT(error_of([&] { load_attention_safetensors(file, 0, {.d_model = 5}); }),
               Contains("tensor 'heads.0.q.weight': shape [2, 4], expected [d_k, d_model] = [2, 5]"));
  }
  SECTION("no output projection, no baseline: both stay empty") {
    std::vector<T> minimal(ts.begin(), ts.begin() + 3);
    const auto w1 = load_attention_safetensors(f.put("min.safetensors", build(minimal)), 1);
    CHECK(w1.heads == 1);
    CHECK(w1.w_o.empty());
    CHECK(w1.s_w_q.empty());
    CHECK(w1.b_q.empty());
  }
}
