// Hostile model folders (issue 48): config integers range-checked in their full width (4294967306
// is not 10), GPT-2's second names for its sizes must agree, config values of the wrong type
// refused by key, JSON nested past 256 levels refused in every file a folder holds, a vocabulary
// id past the table named (not "out of memory"), and finite weights that overflow f32 refused by
// report, layer and pair — exit 1, nothing written.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <nlohmann/json.hpp>
#include <string>

#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/safetensors.hpp"
#include "test_util.hpp"

using namespace headsep;
namespace fs = std::filesystem;
using Catch::Contains;
using json = nlohmann::json;

namespace {

fs::path fixture(const std::string& name) { return testutil::source_path("tests/model/fixtures/decoder/" + name); }

/// A copy of decoder fixture `name` in `tmp`, config.json edited by `edit`.
template <class Edit>
fs::path edited(testutil::TempDir& tmp, const std::string& name, Edit&& edit) {
  const fs::path d = tmp.path / name;
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(fixture(name))) fs::copy_file(e.path(), d / e.path().filename());
  json j = json::parse(std::ifstream(d / "config.json"));
  edit(j);
  std::ofstream(d / "config.json", std::ios::trunc) << j.dump();
  return d;
}

using testutil::error_of;
std::string load_error(const fs::path& d) {
  return error_of([&] { load_model(d); });
}
std::string tokenizer_error(const fs::path& d) {
  return error_of([&] { ModelTokenizer::load(d); });
}

std::string nested(std::size_t levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); }

}  // namespace

TEST_CASE("config integers are range-checked in their full width", "[model][inputs]") {
  std::list<testutil::TempDir> dirs;
  // 4294967306 = 2^32 + 10 once wrapped to 10 (every text cut at 10 tokens); 2^64 - 1 read as -1.
  for (const char* model : {"llama", "gpt2"})
    for (const char* key : {"vocab_size", model == std::string("gpt2") ? "n_positions" : "max_position_embeddings"})
      for (const json& v : {json(4294967306ull), json(18446744073709551615ull), json(18446744073709551616.0), json(-3),
                            json(16777217), json(0), json(64.0), json("64")}) {
        CAPTURE(model, key, v.dump());
        const fs::path d = edited(dirs.emplace_back(), model, [&](json& j) { j[key] = v; });
        const std::string e = load_error(d);
        CHECK_THAT(e, Contains("config.json: '" + std::string(key) + "' must be a positive integer (at most 2^24), got "));
        // The tokenizer reads the same two sizes from the same file, with the same check.
        CHECK(tokenizer_error(d) == e);
      }
  // BERT's config (tests/data holds no model; the loader's checks come first).
  testutil::TempDir bert;
  std::ofstream(bert.path / "config.json") << R"({"model_type": "bert", "vocab_size": 4294967306, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 8})";
  CHECK_THAT(load_error(bert.path), Contains("'vocab_size' must be a positive integer (at most 2^24), got 4294967306"));
}

TEST_CASE("GPT-2's second names for its sizes: either is read, both must agree", "[model][inputs]") {
  std::list<testutil::TempDir> dirs;
  // transformers' GPT2Config maps max_position_embeddings -> n_positions, hidden_size -> n_embd, ...
  const fs::path renamed = edited(dirs.emplace_back(), "gpt2", [](json& j) {
    j["max_position_embeddings"] = j["n_positions"];
    j.erase("n_positions");
    j["hidden_size"] = j["n_embd"];
    j.erase("n_embd");
  });
  CHECK(load_model(renamed)->shape().max_positions == 64);
  CHECK(load_model(renamed)->shape().hidden == 64);
  CHECK(ModelTokenizer::load(renamed).max_positions == 64);
  const fs::path same = edited(dirs.emplace_back(), "gpt2", [](json& j) { j["max_position_embeddings"] = 64; });
  CHECK(load_model(same)->shape().max_positions == 64);
  const fs::path differ = edited(dirs.emplace_back(), "gpt2", [](json& j) { j["max_position_embeddings"] = 32; });
  const std::string want = "config.json: 'n_positions' (64) and 'max_position_embeddings' (32) disagree";
  CHECK_THAT(load_error(differ), Contains(want));
  CHECK_THAT(tokenizer_error(differ), Contains("'max_position_embeddings' (32) and 'n_positions' (64) disagree"));
  for (const auto& [key, alias] : {std::pair{"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"}}) {
    const fs::path d = edited(dirs.emplace_back(), "gpt2", [&](json& j) { j[alias] = j[key].get<int>() * 2; });
    CHECK_THAT(load_error(d), Contains(std::string("'") + key + "'") && Contains(std::string("'") + alias + "'") &&
                                  Contains("disagree"));
  }
}

TEST_CASE("config values of the wrong type are refused by key, not ignored", "[model][inputs]") {
  std::list<testutil::TempDir> dirs;
  const std::vector<std::tuple<const char*, const char*, json, const char*>> cases{
      {"llama", "rope_scaling", "linear", "'rope_scaling' must be an object, got \"linear\""},
      {"llama", "rope_parameters", json::array({1}), "'rope_parameters' must be an object, got [1]"},
      {"llama", "mlp_bias", "true", "'mlp_bias' must be true or false, got \"true\""},
      {"llama", "attention_bias", 1, "'attention_bias' must be true or false, got 1"},
      {"qwen2", "use_sliding_window", "no", "'use_sliding_window' must be true or false, got \"no\""},
      {"gpt2", "scale_attn_weights", "no", "'scale_attn_weights' must be true or false, got \"no\""},
      {"gpt2", "add_cross_attention", 0, "'add_cross_attention' must be true or false, got 0"},
      {"gpt_neox", "use_parallel_residual", 1, "'use_parallel_residual' must be true or false, got 1"},
      {"roberta", "pad_token_id", "1", "'pad_token_id' must be a token id (an integer from 0), got \"1\""},
      {"gpt2", "n_inner", "256", "'n_inner' must be a positive integer (at most 2^24), got \"256\""},
      {"llama", "rms_norm_eps", "1e-6", "'rms_norm_eps' must be a positive number, got \"1e-6\""},
      {"llama", "hidden_act", json::array({"silu"}), "'hidden_act' must be a string, got [\"silu\"]"},
  };
  for (const auto& [model, key, value, want] : cases) {
    CAPTURE(model, key);
    const fs::path d = edited(dirs.emplace_back(), model, [&](json& j) { j[key] = value; });
    CHECK_THAT(load_error(d), Contains((d / "config.json").string() + ": " + want));
  }
  // null stays "not given", as transformers reads it.
  const fs::path nulls = edited(dirs.emplace_back(), "llama", [](json& j) { j["rope_scaling"] = nullptr, j["mlp_bias"] = nullptr; });
  CHECK_NOTHROW(load_model(nulls));
  // The tokenizer's own config: do_lower_case "false" is not false.
  testutil::TempDir bert;
  std::ofstream(bert.path / "config.json") << R"({"model_type": "bert", "vocab_size": 5, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 8})";
  std::ofstream(bert.path / "vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n";
  std::ofstream(bert.path / "tokenizer_config.json") << R"({"do_lower_case": "false"})";
  CHECK_THAT(tokenizer_error(bert.path), Contains("tokenizer_config.json: 'do_lower_case' must be true or false, got \"false\""));
}

TEST_CASE("JSON nested past 256 levels in any file of a model folder is refused by file, no crash", "[model][inputs]") {
  const std::string deep = nested(300000);
  std::list<testutil::TempDir> dirs;
  // config.json: a field nested deep, and the whole file one deep array.
  const fs::path c1 = edited(dirs.emplace_back(), "llama", [](json& j) { j["extra"] = json::array(); });
  std::ofstream(c1 / "config.json", std::ios::trunc) << "{\"extra\": " << deep << "}";
  CHECK_THAT(load_error(c1), Contains((c1 / "config.json").string() + ":1:266: JSON nested deeper than 256 levels"));
  CHECK_THAT(tokenizer_error(c1), Contains("config.json:1:266: JSON nested deeper than 256 levels"));
  // tokenizer.json.
  const fs::path t = edited(dirs.emplace_back(), "llama", [](json&) {});
  std::ofstream(t / "tokenizer.json", std::ios::trunc) << "{\"added_tokens\": " << deep << "}";
  CHECK_THAT(tokenizer_error(t), Contains((t / "tokenizer.json").string() + ":1:273: JSON nested deeper than 256 levels"));
  // The index of a sharded folder: its weight_map nested deep.
  const fs::path s = edited(dirs.emplace_back(), "llama-sharded", [](json&) {});
  std::ofstream(s / "model.safetensors.index.json", std::ios::trunc) << "{\"weight_map\": {\"a\": " << deep << "}}";
  CHECK_THAT(load_error(s), Contains("model.safetensors.index.json:1:276: JSON nested deeper than 256 levels"));
  // A safetensors header.
  testutil::TempDir st;
  const std::string header = "{\"__metadata__\": " + deep + "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(st.path / "w.safetensors", std::ios::binary) << bytes << header;
  CHECK_THAT(error_of([&] { SafeTensors f(st.path / "w.safetensors"); }),
             Contains("w.safetensors: JSON header, line 1, column 273: JSON nested deeper than 256 levels"));
}

TEST_CASE("a vocabulary id past the table is named, not an allocation of 2^31 tokens", "[model][inputs]") {
  std::list<testutil::TempDir> dirs;
  const fs::path d = edited(dirs.emplace_back(), "llama", [](json&) {});
  json tok = json::parse(std::ifstream(d / "tokenizer.json"));
  tok["model"]["vocab"]["huge"] = 2147483000;
  std::ofstream(d / "tokenizer.json", std::ios::trunc) << tok.dump();
  const std::string e = tokenizer_error(d);
  CHECK_THAT(e, Contains("tokenizer.json: model.vocab gives 'huge' id 2147483000, but holds ") && Contains("(ids must be 0.."));
  CHECK(e.find("out of memory") == std::string::npos);
  tok["model"]["vocab"]["huge"] = 4294967306ull;  // past 32 bits: a token id is at most 2^31 - 1
  std::ofstream(d / "tokenizer.json", std::ios::trunc) << tok.dump();
  CHECK_THAT(tokenizer_error(d), Contains("model.vocab.huge must be a token id, got 4294967306"));
}

TEST_CASE("finite weights that overflow f32: refused by report, layer and pair, nothing written", "[model][inputs][cli]") {
  // The last layer's v_proj full of 3e38: V overflows, so the heads' value subspaces and outputs (every pair's
  // output statistics) are not finite, while the maps, head statistics and contexts stay finite.
  testutil::TempDir tmp;
  const fs::path d = tmp.path / "llama";
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(fixture("llama")))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), d / e.path().filename());
  {
    const SafeTensors src(fixture("llama") / "model.safetensors");
    json h = json::object();
    std::string data;
    for (const TensorInfo& t : src.tensors()) {
      REQUIRE(t.dtype == DType::F32);
      const auto raw = src.raw(t.name);
      std::string bytes(reinterpret_cast<const char*>(raw.data()), raw.size());
      if (t.name == "model.layers.1.self_attn.v_proj.weight")
        for (std::size_t i = 0; i < bytes.size(); i += 4) {
          const float big = 3e38f;
          std::memcpy(&bytes[i], &big, 4);
        }
      h[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
      data += bytes;
    }
    const std::string header = h.dump();
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(d / "model.safetensors", std::ios::binary) << len << header << data;
  }
  testutil::write_file(tmp.file("t.jsonl"), "{\"report_id\": \"calm\", \"text\": \"Stop the pump and wait.\"}\n");
  const std::string rows = tmp.file("rows.jsonl"), maps = tmp.file("maps.jsonl"), sum = tmp.file("s.json");
  auto r = testutil::run_cli("run -q -s text -p path=" + testutil::shell_quote(tmp.file("t.jsonl")) + " --model " +
                             testutil::shell_quote(d.string()) + " --per-report " + rows + " --attention " + maps +
                             " --summary " + sum);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("report 'calm': layer 1: pair head1-head2's subspace_cosine is not finite: the model's "
                             "arithmetic overflowed"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  for (const auto& f : {rows, maps, sum}) CHECK_FALSE(fs::exists(f));
}
