// The decoder families beyond GPT-2 and Llama (model/family.hpp's table): GPT-NeoX (parallel and
// sequential residual, partial rotary, fused per-head QKV), Qwen3 (per-head q/k norms, GQA 3),
// Gemma (MQA, (1 + w) norms, scaled embeddings, GeGLU, f16), Gemma-2 (sandwich norms,
// query_pre_attn_scalar, alternating windows), Gemma-3 (q/k norms, local/global RoPE bases),
// OLMo-2 (norms after the sublayers, full-width q/k norms), Phi-3 (fused qkv_proj / gate_up_proj,
// partial rotary, window; LongRoPE), Mixtral and Qwen2-MoE (routed experts, a shared one) against
// transformers (tests/model/fixtures/decoder, made by make_family_fixtures.py): hidden states,
// maps, every metric at every SIMD level; refusals by key.
#include <catch2/catch.hpp>

#include <list>

#include "model/decoder_fixture.hpp"

using namespace decoder_test;

TEST_CASE("GPT-NeoX (Pythia): parallel residual, partial rotary, fused per-head QKV", "[decoder][families]") {
  const auto m = load_model(fixture("gpt_neox"));
  CHECK(m->shape().model_type == "gpt_neox");
  CHECK(m->shape().head_dim == 12);
  check_fixture("gpt_neox");
  check_fixture("gpt_neox-seq");
  const auto notes = m->recognised();
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& s) { return s.find("6 of 12 dims") != s.npos; }));
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& s) { return s.find("parallel") != s.npos; }));
}

TEST_CASE("Qwen3 (per-head q/k norms), OLMo-2 (post-norms, full-width q/k norms), Phi-3 (fused, window)",
          "[decoder][families]") {
  check_fixture("qwen3");
  CHECK(load_model(fixture("qwen3"))->shape().kv_heads == 2);
  check_fixture("olmo2");
  check_fixture("phi3");  // 17 tokens past its window of 6
  CHECK(load_model(fixture("phi3"))->shape().sliding_window == std::vector<std::uint32_t>{6, 6});
  // LongRoPE: 1, 5 and 8 tokens rotate by the short factors, 17 (over the original 8) by the long ones.
  check_fixture("phi3-longrope");
}

TEST_CASE("Mixtral: top-2 of 5 routed experts in every MLP, a window of 7", "[decoder][families]") {
  check_fixture("mixtral");
  const auto notes = load_model(fixture("mixtral"))->recognised();
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& s) { return s.find("5 routed experts, top 2") != s.npos; }));
}

TEST_CASE("Gemma, Gemma-2 and Gemma-3: (1 + w) norms, scaled embeddings, GeGLU, windows, q/k norms",
          "[decoder][families]") {
  check_fixture("gemma");  // f16 weights, one key/value head
  check_fixture("gemma2");  // logits soft-capped at 1.5: every map and the baseline's shaped by the cap
  CHECK(load_model(fixture("gemma2"))->shape().sliding_window == std::vector<std::uint32_t>{5, 0});
  CHECK(load_model(fixture("gemma2"))->shape().attn_softcap == 1.5f);
  check_fixture("gemma3");
  CHECK(load_model(fixture("gemma3"))->shape().sliding_window == std::vector<std::uint32_t>{6, 0, 6});
}

TEST_CASE("Encoders: RoBERTa (positions after padding_idx, a <pad> inside a report) and DistilBERT",
          "[decoder][families]") {
  check_fixture("roberta");
  const auto r = load_model(fixture("roberta"));
  CHECK(r->shape().model_type == "roberta");
  CHECK_FALSE(r->shape().causal);
  CHECK(r->shape().max_positions == 40);  // 42 rows, the first padding_idx + 1 = 2 never a token's
  check_fixture("distilbert");
  CHECK(load_model(fixture("distilbert"))->shape().model_type == "distilbert");
  std::list<testutil::TempDir> dirs;
  CHECK_THAT(load_error(edited(dirs.emplace_back(), "roberta", [](nlohmann::json& j) { j["max_position_embeddings"] = 2; })),
             Catch::Contains("leaves no position after pad_token_id 1"));
  CHECK_THAT(load_error(edited(dirs.emplace_back(), "distilbert", [](nlohmann::json& j) { j["activation"] = "relu"; })),
             Catch::Contains("activation 'relu'"));
}

TEST_CASE("Family configs: unsupported variants are refused by their key", "[decoder][families]") {
  std::list<testutil::TempDir> dirs;
  auto err = [&](const char* name, void (*edit)(nlohmann::json&)) { return load_error(edited(dirs.emplace_back(), name, edit)); };
  CHECK_THAT(err("qwen3", [](nlohmann::json& j) { j["attn_logit_softcapping"] = 50.0; }),
             Catch::Contains("'attn_logit_softcapping' 50.0 for model_type 'qwen3'") && Catch::Contains("config.json"));
  CHECK_THAT(err("gemma3", [](nlohmann::json& j) { j["use_bidirectional_attention"] = true; }),
             Catch::Contains("'use_bidirectional_attention' is true"));
  CHECK_THAT(err("phi3", [](nlohmann::json& j) { j["rope_parameters"]["rope_type"] = "yarn"; }),
             Catch::Contains("unsupported rope type 'yarn'"));
  CHECK_THAT(err("phi3-longrope", [](nlohmann::json& j) { j["rope_parameters"]["long_factor"] = {1.0, 2.0}; }),
             Catch::Contains("'long_factor': 3 numbers"));
  CHECK_THAT(err("gpt_neox", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.25; }),
             Catch::Contains("rotary dimensions int(head_dim 12 x 0.25) = 3"));
  CHECK_THAT(err("olmo2", [](nlohmann::json& j) { j["hidden_act"] = "relu"; }), Catch::Contains("hidden_act 'relu'"));
  CHECK_THAT(err("gemma3", [](nlohmann::json& j) { j["layer_types"] = {"sliding_attention", "full_attention"}; }),
             Catch::Contains("one type per layer (3)"));
  // A tensor the family names, missing: named with its file.
  CHECK_THAT(err("qwen3", [](nlohmann::json& j) { j["num_hidden_layers"] = 3; }),
             Catch::Contains("tensor 'model.layers.2.self_attn.q_proj.weight'"));
  // Every family is named when a model_type is not known.
  CHECK_THAT(err("qwen3", [](nlohmann::json& j) { j["model_type"] = "deepseek_v3"; }),
             Catch::Contains("model_type 'deepseek_v3'") && Catch::Contains("\"gpt_neox\"") && Catch::Contains("\"qwen2_moe\""));
}

namespace {
/// The largest difference of a 17-token forward's maps (every layer) from the fixture's reference.
double map_gap(const Architecture& m, const std::string& name) {
  const SafeTensors ref(fixture(name) / "reference.safetensors");
  const Out o = run(m, ref_ids(ref, 17), {0, 17}, SimdLevel::scalar);
  double gap = 0;
  for (std::size_t l = 0; l < m.shape().layers; ++l) {
    const auto maps = ref.read_f32("maps_17_" + std::to_string(l));
    for (std::size_t i = 0; i < maps.size(); ++i) gap = std::max(gap, double(std::abs(maps[i] - o.maps[l][i])));
  }
  return gap;
}
}  // namespace

TEST_CASE("The fixtures exercise the switches: without the cap, the long factors or a window the maps differ",
          "[decoder][families]") {
  std::list<testutil::TempDir> dirs;
  auto without = [&](const char* name, void (*edit)(nlohmann::json&)) {
    return map_gap(*load_model(edited(dirs.emplace_back(), name, edit)), name);
  };
  CHECK(map_gap(*load_model(fixture("gemma2")), "gemma2") < 1e-5);
  CHECK(without("gemma2", [](nlohmann::json& j) { j.erase("attn_logit_softcapping"); }) > 1e-2);
  CHECK(without("phi3-longrope", [](nlohmann::json& j) { j["rope_parameters"]["long_factor"] = j["rope_parameters"]["short_factor"]; }) > 1e-3);
  CHECK(without("gemma3", [](nlohmann::json& j) { j["sliding_window"] = 64; }) > 1e-2);
  CHECK(without("gemma3", [](nlohmann::json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e6; }) > 1e-3);
  CHECK(without("mixtral", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }) > 1e-3);
}

TEST_CASE("Qwen2-MoE: routed experts without renormalising, a gated shared expert, a dense layer",
          "[decoder][families]") {
  check_fixture("qwen2_moe");
  const auto notes = load_model(fixture("qwen2_moe"))->recognised();
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& s) {
    return s.find("5 routed experts, top 2 per token (softmax) of width 24 in 2 of 3 layers, a sigmoid-gated shared "
                  "expert of width 32") != s.npos;
  }));
  std::list<testutil::TempDir> dirs;
  auto gap = [&](void (*edit)(nlohmann::json&)) {
    return map_gap(*load_model(edited(dirs.emplace_back(), "qwen2_moe", edit)), "qwen2_moe");
  };
  CHECK(map_gap(*load_model(fixture("qwen2_moe")), "qwen2_moe") < 1e-5);
  // Each switch changes the maps: renormalising the top 2, a sparse middle layer (whose experts
  // the folder lacks: refused by name), the shared expert.
  CHECK(gap([](nlohmann::json& j) { j["norm_topk_prob"] = true; }) > 1e-4);
  CHECK_THAT(load_error(edited(dirs.emplace_back(), "qwen2_moe", [](nlohmann::json& j) { j["mlp_only_layers"] = nlohmann::json::array(); })),
             Catch::Contains("model.layers.1.mlp.gate.weight"));
  CHECK_THAT(load_error(edited(dirs.emplace_back(), "qwen2_moe", [](nlohmann::json& j) { j["mlp_only_layers"] = {3}; })),
             Catch::Contains("mlp_only_layers holds 3 (layer indices 0..2)"));
  CHECK_THAT(load_error(edited(dirs.emplace_back(), "qwen2_moe", [](nlohmann::json& j) { j["decoder_sparse_step"] = 0; })),
             Catch::Contains("'decoder_sparse_step' must be a positive integer"));
}

TEST_CASE("Gemma-3's sliding layers use the local RoPE base, the others the global one", "[decoder][families]") {
  std::list<testutil::TempDir> dirs;
  // Same bases everywhere: the maps of the full-attention layer change; a window as wide as the
  // positions cuts nothing, yet the sliding layers keep their local base (the layer type decides).
  const auto m = load_model(edited(dirs.emplace_back(), "gemma3", [](nlohmann::json& j) { j["sliding_window"] = 64; }));
  CHECK(m->shape().sliding_window.empty());
  const auto notes = m->recognised();
  CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& s) { return s.find("sliding layers: default, theta 10000") != s.npos; }));
}

TEST_CASE("Text through a family's tokenizer.json: Pythia (byte-level BPE), Gemma-3 (byte-fallback BPE)",
          "[decoder][families]") {
  // The fixtures carry the tokenizer fixtures' tokenizer.json (made by `tokenizers`): a text run's
  // rows hold the ids `tokenizers` gave for the same texts.
  for (const auto& [model, tok] : {std::pair{"gpt_neox", "tok_gpt2"}, std::pair{"gemma3", "tok_llama"}}) {
    INFO(model);
    testutil::TempDir tmp;
    std::ifstream expected(testutil::source_path(std::string("tests/model/fixtures/") + tok + "/expected.jsonl"));
    std::vector<std::vector<std::uint32_t>> ids;
    std::ofstream texts(tmp.file("texts.jsonl"));
    for (std::string line; std::getline(expected, line) && ids.size() < 6;) {
      const auto j = nlohmann::json::parse(line);
      if (j["ids"].size() < 3 || j["ids"].size() > 30) continue;
      texts << nlohmann::json{{"report_id", "r" + std::to_string(ids.size())}, {"text", j["text"]}}.dump() << "\n";
      ids.push_back(j["ids"].get<std::vector<std::uint32_t>>());
    }
    texts.close();
    const auto r = testutil::run_cli("run -q -s text -p path=" + testutil::shell_quote(tmp.file("texts.jsonl")) +
                                     " --model " + testutil::shell_quote(fixture(model).string()) + " --per-report " +
                                     testutil::shell_quote(tmp.file("rows.jsonl")));
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::ifstream rows(tmp.file("rows.jsonl"));
    std::size_t seen = 0;
    for (std::string line; std::getline(rows, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["layer"] != 0) continue;
      REQUIRE(seen < ids.size());
      CHECK(j["token_ids"].get<std::vector<std::uint32_t>>() == ids[seen++]);
      CHECK(std::isfinite(j["head_separation"].get<double>()));
    }
    CHECK(seen == ids.size());
  }
}

TEST_CASE("headsep info --model says what it recognised", "[decoder][families]") {
  const auto r = testutil::run_cli("info --model " + testutil::shell_quote(fixture("gemma3").string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("model_type:     gemma3_text") && Catch::Contains("per-head q/k norms") &&
                        Catch::Contains("sliding window per layer (0 = full causal): 6 0 6") &&
                        Catch::Contains("scores / sqrt(query_pre_attn_scalar 24"));
  const auto bad = testutil::run_cli("info --model " + testutil::shell_quote(fixture("nowhere").string()));
  CHECK(bad.status == 1);
  CHECK_THAT(bad.err, Catch::Contains("config.json"));
}
