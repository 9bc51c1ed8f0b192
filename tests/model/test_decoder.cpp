// The decoders (GPT-2, Llama with GQA, a bf16 and a sharded Llama, llama3 rotary scaling,
// Mistral's sliding window, Qwen2's biases) against transformers on tiny random models
// (tests/model/fixtures/decoder, made by make_decoder_fixtures.py; no torch needed here): hidden
// states within 1e-4, every map (the baseline's from NumPy) within 1e-5, every head, pair and
// context metric within 1e-4 relative of NumPy's from transformers' maps; at every SIMD level.
// Plus: grouping never changes a bit, GQA pairs, and every refusal names what is at fault.
#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/packed_linear.hpp"
#include "model/decoder_fixture.hpp"
#include "test_util.hpp"

using namespace headsep;
namespace fs = std::filesystem;

using namespace decoder_test;

TEST_CASE("GPT-2 matches transformers: hidden states, maps, every head metric", "[decoder]") {
  const auto m = load_model(fixture("gpt2"));
  CHECK(m->shape().model_type == "gpt2");
  CHECK(m->shape().kv_heads == 4);
  check_fixture("gpt2");
}

TEST_CASE("Llama with grouped-query attention matches transformers", "[decoder]") {
  const auto m = load_model(fixture("llama"));
  const ModelShape& c = m->shape();
  CHECK(c.heads == 4);
  CHECK(c.kv_heads == 2);
  CHECK(c.kv_head(1) == 0);
  CHECK(c.kv_head(2) == 0);
  CHECK(c.kv_head(3) == 1);
  CHECK(c.kv_head(4) == 1);
  check_fixture("llama");
  // Query heads of one group share V: their subspace cosine is 1, across groups it is not.
  const SafeTensors ref(fixture("llama") / "reference.safetensors");
  const auto ids = ref_ids(ref, 17);
  const Out o = run(*m, ids, {0, 17}, SimdLevel::scalar);
  CHECK(o.ps[0][0 * kPairStats + kSubspaceCosine] == Approx(1.0).epsilon(1e-6));  // (1,2)
  CHECK(o.ps[0][1 * kPairStats + kSubspaceCosine] < 0.99);                        // (1,3)
}

TEST_CASE("bf16 weights, sharded folders, llama3 rotary scaling, Qwen2 biases", "[decoder]") {
  // bf16 held as bf16 and widened per k-pair (every level; vdpbf16ps off: test_decoder_bf16.cpp),
  // and widened to f32 at load: both the f32 kernel's bits, within 1e-4 of transformers in f32.
  kernels::set_bf16_dot(false);
  check_fixture("llama-bf16");
  kernels::set_bf16_dot(true);
  check_fixture("llama-bf16", 17, WeightDType::f32);
  check_fixture("llama-sharded");  // one key/value head: multi-query attention
  CHECK(load_model(fixture("llama-sharded"))->shape().kv_heads == 1);
  check_fixture("llama3-rope");
  check_fixture("qwen2");
}

TEST_CASE("Decoder reports grouped or alone give the same bits, empty reports are zeros", "[decoder]") {
  for (const char* name : {"gpt2", "llama"}) {
    const auto m = load_model(fixture(name));
    const SafeTensors ref(fixture(name) / "reference.safetensors");
    const auto [all, off] = recorded_reports(ref, {5, 1, 0, 17, 8});  // 0: an empty report
    const SimdLevel level = supported_levels().back();
    const Out together = run(*m, all, off, level);
    const std::size_t R = off.size() - 1, H = m->shape().heads;
    for (std::size_t r = 0; r < R; ++r) {
      std::vector<std::uint32_t> one(all.begin() + off[r], all.begin() + off[r + 1]);
      const Out alone = run(*m, one, {0, off[r + 1] - off[r]}, level);
      for (std::size_t l = 0; l < m->shape().layers; ++l)
        for (std::size_t h = 0; h <= H; ++h)
          for (std::size_t s = 0; s < kHeadStats; ++s) {
            CAPTURE(name, r, l, h, s);
            CHECK(together.hs[l][(h * kHeadStats + s) * R + r] == alone.hs[l][h * kHeadStats + s]);
            if (off[r + 1] == off[r]) CHECK(alone.hs[l][h * kHeadStats + s] == 0.0);
          }
    }
  }
}


TEST_CASE("Decoder groups run in parallel: the same bits as one thread and as reports alone", "[decoder]") {
  // 150 reports of 1, 5, 8 or 17 tokens (1153 tokens: three groups of about 512) in one call: the groups
  // run as oneTBB tasks on 4 threads, on 1, and each report alone; every metric, map and hidden
  // state the same bits.
  for (const char* name : {"gpt2", "llama"}) {
    const auto m = load_model(fixture(name));
    const SafeTensors ref(fixture(name) / "reference.safetensors");
    std::vector<std::size_t> lengths;
    for (std::size_t r = 0; r < 150; ++r) lengths.push_back(std::vector<std::size_t>{1, 5, 8, 17}[r % 4]);
    const auto [all, off] = recorded_reports(ref, lengths);
    REQUIRE(all.size() > 1024);  // at least three groups
    const SimdLevel level = supported_levels().back();
    Out four, one;
    tbb::task_arena(4).execute([&] { four = run(*m, all, off, level); });
    tbb::task_arena(1).execute([&] { one = run(*m, all, off, level); });
    CHECK(four.all_hidden == one.all_hidden);
    for (std::size_t l = 0; l < m->shape().layers; ++l) {
      CHECK(four.hs[l] == one.hs[l]);
      CHECK(four.ps[l] == one.ps[l]);
      CHECK(four.ctx[l] == one.ctx[l]);
      CHECK(four.maps[l] == one.maps[l]);
    }
    const std::size_t R = off.size() - 1, H = m->shape().heads;
    for (std::size_t r : {std::size_t(0), std::size_t(77), R - 1}) {
      const std::vector<std::uint32_t> ids(all.begin() + off[r], all.begin() + off[r + 1]);
      const Out alone = run(*m, ids, {0, off[r + 1] - off[r]}, level);
      for (std::size_t l = 0; l < m->shape().layers; ++l)
        for (std::size_t i = 0; i < (H + 1) * kHeadStats; ++i) {
          CAPTURE(name, r, l, i);
          CHECK(four.hs[l][i * R + r] == alone.hs[l][i]);
        }
    }
  }
}

TEST_CASE("Mistral: the sliding window masks each layer's keys as transformers does (17 tokens, window 8)",
          "[decoder]") {
  // Lengths 1, 5, 8 fit the window; at 17 every query past the 8th sees only its last 8 keys:
  // transformers' maps, hidden states and every metric (the baseline windowed alike).
  check_fixture("mistral");
  const auto m = load_model(fixture("mistral"));
  CHECK(m->shape().max_positions == 64);  // max_position_embeddings: the window no longer caps it
  CHECK(m->shape().sliding_window == std::vector<std::uint32_t>{8, 8});
}

TEST_CASE("sliding windows: which layers have one, as transformers reads the config", "[decoder]") {
  std::list<testutil::TempDir> dirs;  // one folder per edited copy
  auto ed = [&](const char* name, void (*edit)(nlohmann::json&)) { return edited(dirs.emplace_back(), name, edit); };
  auto windows = [](const fs::path& d) { return load_model(d)->shape().sliding_window; };
  using V = std::vector<std::uint32_t>;
  // Qwen2: off unless use_sliding_window; then the layers from max_window_layers (a config
  // without layer_types, as transformers before 4.5x wrote them), or as layer_types lists them.
  CHECK(windows(ed("qwen2", [](nlohmann::json& j) { j["sliding_window"] = 4; })) == V{});
  const fs::path q = ed("qwen2", [](nlohmann::json& j) {
    j["sliding_window"] = 4, j["use_sliding_window"] = true, j["max_window_layers"] = 1, j.erase("layer_types");
  });
  CHECK(windows(q) == V{0, 4});
  CHECK(windows(ed("qwen2", [](nlohmann::json& j) {
          j["sliding_window"] = 4, j["use_sliding_window"] = true, j["layer_types"] = {"sliding_attention", "full_attention"};
        })) == V{4, 0});
  // layer_types, where a config lists them, decide per layer.
  CHECK(windows(ed("mistral", [](nlohmann::json& j) {
          j["layer_types"] = {"full_attention", "sliding_attention"};
        })) == V{0, 8});
  // A window as wide as max_position_embeddings cuts nothing; null is none.
  CHECK(windows(ed("mistral", [](nlohmann::json& j) { j["sliding_window"] = 64; })) == V{});
  CHECK(windows(ed("mistral", [](nlohmann::json& j) { j["sliding_window"] = nullptr; })) == V{});
  CHECK_THAT(load_error(ed("mistral", [](nlohmann::json& j) { j["sliding_window"] = 0; })),
             Catch::Contains("'sliding_window' must be a positive integer"));
  CHECK_THAT(load_error(ed("mistral", [](nlohmann::json& j) { j["layer_types"] = {"full_attention", "chunked"}; })),
             Catch::Contains("layer_types[1] is \"chunked\""));
  CHECK_THAT(load_error(ed("mistral", [](nlohmann::json& j) { j["layer_types"] = {"full_attention"}; })),
             Catch::Contains("one type per layer (2)"));
  // The Qwen2 model above at 9 tokens: layer 0 full causal, layer 1 within its window of 4.
  const auto qm = load_model(q);
  std::vector<std::uint32_t> ids(9);
  for (std::uint32_t t = 0; t < 9; ++t) ids[t] = 3 + 7 * t;
  const Out o = run(*qm, ids, {0, 9}, SimdLevel::scalar);
  const std::size_t H1 = qm->shape().heads + 1;
  for (std::size_t h = 0; h < H1; ++h)
    for (std::size_t q0 = 0; q0 < 9; ++q0)
      for (std::size_t k = 0; k <= q0; ++k) {
        CAPTURE(h, q0, k);
        CHECK(o.maps[0][(h * 9 + q0) * 9 + k] > 0.0f);
        CHECK((o.maps[1][(h * 9 + q0) * 9 + k] > 0.0f) == (k + 4 > q0));
      }
}

TEST_CASE("Decoder folders: every refusal names the file and the field or tensor", "[decoder]") {
  testutil::TempDir tmp;
  CHECK_THAT(load_error(edited(tmp, "llama", [](nlohmann::json& j) { j["num_hidden_layers"] = 3; })),
             Catch::Contains("tensor 'model.layers.2.self_attn.q_proj.weight'") && Catch::Contains("model.safetensors"));
  testutil::TempDir t2;
  CHECK_THAT(load_error(edited(t2, "llama", [](nlohmann::json& j) { j["rope_parameters"]["rope_type"] = "yarn"; })),
             Catch::Contains("unsupported rope type 'yarn'") && Catch::Contains("config.json"));
  testutil::TempDir t3;
  CHECK_THAT(load_error(edited(t3, "llama", [](nlohmann::json& j) { j["quantization_config"] = {{"quant_method", "gptq"}}; })),
             Catch::Contains("quantized model (quantization_config gptq)"));
  testutil::TempDir t4;
  CHECK_THAT(load_error(edited(t4, "llama", [](nlohmann::json& j) { j["model_type"] = "falcon"; })),
             Catch::Contains("unsupported architecture (model_type 'falcon')") && Catch::Contains("\"llama\""));
  testutil::TempDir t5;
  CHECK_THAT(load_error(edited(t5, "gpt2", [](nlohmann::json& j) { j["activation_function"] = "relu"; })),
             Catch::Contains("activation_function 'relu'"));
  testutil::TempDir t6;
  CHECK_THAT(load_error(edited(t6, "llama", [](nlohmann::json& j) { j["num_key_value_heads"] = 3; })),
             Catch::Contains("not a multiple of num_key_value_heads 3"));
  testutil::TempDir t7;  // a shard the index names, gone
  const fs::path d7 = edited(t7, "llama-sharded", nullptr);
  fs::remove(d7 / "model-00002-of-00004.safetensors");
  CHECK_THAT(load_error(d7), Catch::Contains("model-00002-of-00004.safetensors"));
}

TEST_CASE("run --model on decoder folders reads text through their tokenizer.json", "[decoder]") {
  // gpt2 (byte-level BPE) and llama (byte-fallback BPE, <s> template) carry the tokenizer fixtures'
  // tokenizer.json: a text run's rows hold the ids `tokenizers` gives for the same texts.
  for (const auto& [model, tok] : {std::pair{"gpt2", "tok_gpt2"}, std::pair{"llama", "tok_llama"}}) {
    INFO(model);
    testutil::TempDir tmp;
    std::ifstream expected(testutil::source_path(std::string("tests/model/fixtures/") + tok + "/expected.jsonl"));
    std::vector<std::vector<std::uint32_t>> ids;
    std::ofstream texts(tmp.file("texts.jsonl"));
    for (std::string line; std::getline(expected, line) && ids.size() < 8;) {
      const auto j = nlohmann::json::parse(line);
      const std::string text = j["text"];
      const bool word = std::any_of(text.begin(), text.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
      if (!word || j["ids"].size() < 3 || j["ids"].size() > 40) continue;
      texts << nlohmann::json{{"report_id", "r" + std::to_string(ids.size())}, {"text", text}}.dump() << "\n";
      ids.push_back(j["ids"].get<std::vector<std::uint32_t>>());
    }
    texts.close();
    REQUIRE(ids.size() == 8);
    const auto r = testutil::run_cli("run -s text -p path=" + testutil::shell_quote(tmp.file("texts.jsonl")) + " --model " +
                                     testutil::shell_quote(fixture(model).string()) + " --per-report " +
                                     testutil::shell_quote(tmp.file("rows.jsonl")) + " --summary " +
                                     testutil::shell_quote(tmp.file("s.json")) + " --quiet");
    REQUIRE(r.status == 0);
    // The summary says the heads are causal and which key/value head each query head reads.
    const auto sum = nlohmann::json::parse(std::ifstream(tmp.file("s.json")));
    CHECK(sum["model_type"] == model);
    CHECK(sum["causal"] == true);
    const std::vector<std::uint32_t> kv_of = std::string(model) == "llama" ? std::vector<std::uint32_t>{0, 0, 1, 1}
                                                                           : std::vector<std::uint32_t>{0, 1, 2, 3};
    CHECK(sum["kv_heads"] == kv_of.back() + 1);
    CHECK(sum["kv_head_of"].get<std::vector<std::uint32_t>>() == kv_of);
    CHECK_THAT(sum["baseline"].get<std::string>(), Catch::Contains("causal"));
    std::ifstream rows(tmp.file("rows.jsonl"));
    std::size_t seen = 0;
    for (std::string line; std::getline(rows, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["layer"] != 0) continue;
      REQUIRE(seen < ids.size());
      CHECK(j["token_ids"].get<std::vector<std::uint32_t>>() == ids[seen]);
      CHECK(j["n_tokens"] == ids[seen].size());
      CHECK(std::isfinite(j["head_separation"].get<double>()));
      ++seen;
    }
    CHECK(seen == ids.size());
  }
  // Without tokenizer.json (and no vocab.txt) the folder cannot read text: refused by name.
  testutil::TempDir tmp;
  const fs::path bare = edited(tmp, "gpt2", nullptr);
  fs::remove(bare / "tokenizer.json");
  const auto r = testutil::run_cli("run -s text -p path=" + testutil::shell_quote(tmp.file("none.csv")) + " --model " +
                                   testutil::shell_quote(bare.string()) + " --quiet");
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("tokenizer.json"));
}

namespace {
/// One CSV line's fields (RFC 4180: quoted fields, "" inside quotes), CR dropped.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else if (c != '\r' || quoted) out.back() += c;
  }
  return out;
}
}  // namespace

TEST_CASE("Decoder rows name each query head's key/value head and the pairs that share one", "[decoder]") {
  // Token ids in (CSV source; no tokenizer needed): llama groups 4 query heads on 2 key/value
  // heads, llama-sharded on 1 (multi-query), gpt2 gives each its own.
  struct Case {
    const char* model;
    std::vector<std::uint32_t> kv_of;
    std::size_t shared;  // pairs that share a key/value head: (1,2) and (3,4); all 6; none
  };
  for (const auto& c : {Case{"llama", {0, 0, 1, 1}, 2}, Case{"llama-sharded", {0, 0, 0, 0}, 6}, Case{"gpt2", {0, 1, 2, 3}, 0}}) {
    INFO(c.model);
    testutil::TempDir tmp;
    testutil::write_file(tmp.file("ids.csv"), "report_id,scenario,token,token_id,d\nr1,x,a,1,0.5\nr1,x,b,17,1\nr1,x,c,42,0\n"
                                              "r2,x,a,7,1\nr2,x,b,5,0\n");
    const std::string base = "run -q -s csv -p path=" + testutil::shell_quote(tmp.file("ids.csv")) +
                             " -p features=token_id,d -p weights=false --axes d=d --model " +
                             testutil::shell_quote(fixture(c.model).string()) + " --per-report ";
    for (const char* ext : {"jsonl", "csv"}) {
      const auto r = testutil::run_cli(base + testutil::shell_quote(tmp.file(std::string("rows.") + ext)));
      INFO(r.err);
      REQUIRE(r.status == 0);
    }
    std::ifstream jl(tmp.file("rows.jsonl"));
    std::size_t rows = 0;
    for (std::string line; std::getline(jl, line); ++rows) {
      const auto a = nlohmann::json::parse(line)["attention"];
      CHECK_FALSE(a["heads"]["single"].contains("kv_head"));  // the baseline reads every key/value head
      for (std::uint32_t h = 1; h <= 4; ++h) CHECK(a["heads"]["head" + std::to_string(h)]["kv_head"] == c.kv_of[h - 1]);
      std::size_t shared = 0;
      for (std::uint32_t i = 1; i <= 4; ++i)
        for (std::uint32_t j = i + 1; j <= 4; ++j) {
          const auto& p = a["pairs"]["head" + std::to_string(i) + "_head" + std::to_string(j)];
          CHECK(p["shared_kv"] == (c.kv_of[i - 1] == c.kv_of[j - 1]));
          CHECK(p.contains("js_divergence"));
          shared += p["shared_kv"].get<bool>();
        }
      CHECK(shared == c.shared);
    }
    CHECK(rows == 2 * 2);  // 2 reports x 2 layers
    // CSV: headH_kv_head after head H's statistics, headI_headJ_shared_kv (true/false) after the pair's.
    std::ifstream cs(tmp.file("rows.csv"));
    std::string line;
    std::getline(cs, line);
    const auto header = csv_fields(line);
    auto col = [&](const std::string& name) {
      const auto it = std::find(header.begin(), header.end(), name);
      REQUIRE(it != header.end());
      return static_cast<std::size_t>(it - header.begin());
    };
    CHECK(std::find(header.begin(), header.end(), "single_kv_head") == header.end());
    CHECK(col("head2_kv_head") == col("head2_first_weight") + 1);
    CHECK(col("head3_head4_shared_kv") == col("head3_head4_output_distance") + 1);
    CHECK(header.back() == "head3_head4_shared_kv");
    std::size_t csv_rows = 0;
    for (; std::getline(cs, line); ++csv_rows) {
      const auto f = csv_fields(line);
      REQUIRE(f.size() == header.size());
      for (std::uint32_t h = 1; h <= 4; ++h) CHECK(f[col("head" + std::to_string(h) + "_kv_head")] == std::to_string(c.kv_of[h - 1]));
      for (std::uint32_t i = 1; i <= 4; ++i)
        for (std::uint32_t j = i + 1; j <= 4; ++j)
          CHECK(f[col("head" + std::to_string(i) + "_head" + std::to_string(j) + "_shared_kv")] ==
                (c.kv_of[i - 1] == c.kv_of[j - 1] ? "true" : "false"));
    }
    CHECK(csv_rows == 2 * 2);
  }
}
