// The BERT encoder on the real all-MiniLM-L6-v2 weights against an independent NumPy float64
// forward pass (tests/model/bert_reference.py, Debian's /usr/bin/python3 + python3-numpy, run
// here so no large reference file is committed and the oracle always sees the same weights):
// attention maps of every layer and head (the full-width baseline included) within 1e-4,
// hidden states of every layer within 1e-3 absolute, at every supported SIMD level. Plus:
// grouping/chunking never changes a bit, the metrics are those of the maps, GELU's accuracy,
// and every bad model (config, tensors) is a clear error naming the file and tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "headsep/kernels.hpp"
#include "headsep/wordpiece.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using namespace headsep;
using json = nlohmann::json;

namespace {

const char* kSentences[] = {"Stop decision: pressure anomaly on pump P-101, return condition not met.",
                            "정지결정 압력이상 복귀조건", "Return when the seal holds for 2 h.", "ok"};

struct Run {
  std::vector<std::vector<double>> ctx, hs, ps;  // per layer
  std::vector<std::vector<float>> maps;          // per layer
  std::vector<float> all_hidden;
};

Run forward(const BertModel& m, const std::vector<std::uint32_t>& ids, const std::vector<std::uint64_t>& off,
            const std::vector<float>& axis, SimdLevel level, bool keep_maps, std::size_t first = 0,
            std::size_t count = std::size_t(-1)) {
  const auto& c = m.config();
  const std::size_t R = off.size() - 1, H = c.heads, P = H * (H - 1) / 2, T = off.back();
  Run run;
  run.ctx.assign(c.layers, std::vector<double>((H + 1) * R, -7.0));
  run.hs.assign(c.layers, std::vector<double>((H + 1) * kHeadStats * R, -7.0));
  run.ps.assign(c.layers, std::vector<double>(P * kPairStats * R, -7.0));
  std::vector<std::uint64_t> mo(R);
  std::uint64_t acc = 0;
  for (std::size_t r = 0; r < R; ++r) {
    mo[r] = acc;
    acc += (H + 1) * (off[r + 1] - off[r]) * (off[r + 1] - off[r]);
  }
  if (keep_maps) run.maps.assign(c.layers, std::vector<float>(acc, -1.0f));
  std::vector<BertLayerOut> outs(c.layers);
  for (std::size_t l = 0; l < c.layers; ++l) {
    outs[l].context = run.ctx[l].data();
    outs[l].head_stats = run.hs[l].data();
    outs[l].pair_stats = run.ps[l].data();
    outs[l].stride = R;
    if (keep_maps) outs[l].maps = run.maps[l].data(), outs[l].maps_offset = mo.data();
  }
  run.all_hidden.assign((c.layers + 1) * T * c.hidden, -9.0f);
  const float* ax[1] = {axis.data()};
  BertScratch s;
  // Reports [first, first+count) per call, the rest in further calls: grouping must not matter.
  if (count == std::size_t(-1)) {
    m.forward(ids.data(), off.data(), R, 1, ax, level, outs, nullptr, s, run.all_hidden.data());
  } else {
    std::vector<float> hid((c.layers + 1) * T * c.hidden);
    for (std::size_t r = first; r < R; r += count) {
      const std::size_t k = std::min(count, R - r);
      std::vector<BertLayerOut> o2 = outs;
      for (auto& o : o2) {
        o.context += r, o.head_stats += r, o.pair_stats += r;
        if (o.maps) o.maps_offset += r;
      }
      const std::size_t t0 = off[r], tn = off[r + k] - t0;
      std::vector<float> part((c.layers + 1) * tn * c.hidden);
      m.forward(ids.data(), off.data() + r, k, 1, ax, level, o2, nullptr, s, part.data());
      for (std::size_t l = 0; l <= c.layers; ++l)
        std::memcpy(run.all_hidden.data() + (l * T + t0) * c.hidden, part.data() + l * tn * c.hidden,
                    tn * c.hidden * sizeof(float));
    }
  }
  return run;
}

struct Input {
  std::vector<std::uint32_t> ids;
  std::vector<std::uint64_t> off{0};
  std::vector<float> axis;
};

Input tokenize(const WordPiece& wp) {
  Input in;
  Encoding e;
  for (const char* s : kSentences) {
    wp.encode(s, e);
    in.ids.insert(in.ids.end(), e.ids.begin(), e.ids.end());
    in.off.push_back(in.ids.size());
  }
  for (std::size_t t = 0; t < in.ids.size(); ++t) in.axis.push_back(static_cast<float>(t % 5) - 2.0f);
  return in;
}

}  // namespace

TEST_CASE("BERT forward matches the NumPy float64 reference on all-MiniLM-L6-v2", "[bert][model]") {
  const auto dir = testutil::model_dir();
  const BertModel m = BertModel::load(dir);
  const auto& c = m.config();
  REQUIRE(c.layers == 6);
  REQUIRE(c.heads == 12);
  REQUIRE(c.hidden == 384);
  const WordPiece wp = WordPiece::from_file(dir / "vocab.txt");
  const Input in = tokenize(wp);
  const std::size_t R = in.off.size() - 1, H = c.heads, D = c.hidden, T = in.ids.size();

  testutil::TempDir tmp;
  json req;
  for (std::size_t r = 0; r < R; ++r)
    req["reports"].push_back(std::vector<std::uint32_t>(in.ids.begin() + in.off[r], in.ids.begin() + in.off[r + 1]));
  testutil::write_file(tmp.file("in.json"), req.dump());
  const auto res = testutil::run_shell("/usr/bin/python3 " +
                                       testutil::shell_quote(HEADSEP_SOURCE_DIR "/tests/model/bert_reference.py") + " " +
                                       testutil::shell_quote(dir.string()) + " " + tmp.file("in.json") + " " +
                                       tmp.file("out.json"));
  INFO(res.err);
  REQUIRE(res.status == 0);
  const json ref = json::parse(testutil::read_file(tmp.file("out.json")));

  for (SimdLevel level : supported_levels()) {
    INFO("level " << to_string(level));
    const Run run = forward(m, in.ids, in.off, in.axis, level, true);
    double max_map = 0, max_hidden = 0, max_entropy = 0;
    std::uint64_t mo = 0;
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t n = in.off[r + 1] - in.off[r];
      const auto hid = ref["reports"][r]["hidden"].get<std::vector<double>>();
      const auto maps = ref["reports"][r]["maps"].get<std::vector<double>>();
      REQUIRE(hid.size() == (c.layers + 1) * n * D);
      REQUIRE(maps.size() == c.layers * (H + 1) * n * n);
      for (std::size_t l = 0; l <= c.layers; ++l)
        for (std::size_t i = 0; i < n * D; ++i)
          max_hidden = std::max(max_hidden, std::abs(double(run.all_hidden[(l * T + in.off[r]) * D + i]) -
                                                     hid[l * n * D + i]));
      for (std::size_t l = 0; l < c.layers; ++l)
        for (std::size_t h = 0; h <= H; ++h) {
          double entropy = 0;
          for (std::size_t q = 0; q < n; ++q)
            for (std::size_t k = 0; k < n; ++k) {
              const double want = maps[((l * (H + 1) + h) * n + q) * n + k];
              max_map = std::max(max_map, std::abs(double(run.maps[l][mo + (h * n + q) * n + k]) - want));
              entropy -= want > 0 ? want * std::log(want) : 0.0;
            }
          // The kernel's entropy statistic is the mean over queries of the map rows' entropy.
          max_entropy = std::max(max_entropy, std::abs(run.hs[l][(h * kHeadStats + kEntropy) * R + r] - entropy / double(n)));
        }
      mo += (H + 1) * n * n;
    }
    CAPTURE(max_map, max_hidden, max_entropy);
    CHECK(max_map <= 1e-4);
    CHECK(max_hidden <= 1e-3);
    CHECK(max_entropy <= 1e-3);
  }
}

TEST_CASE("BERT forward: grouping and chunking never change a bit", "[bert][model]") {
  const auto dir = testutil::model_dir();
  const BertModel m = BertModel::load(dir);
  const WordPiece wp = WordPiece::from_file(dir / "vocab.txt");
  const Input in = tokenize(wp);
  const SimdLevel level = supported_levels().back();
  const Run all = forward(m, in.ids, in.off, in.axis, level, false);
  const Run one = forward(m, in.ids, in.off, in.axis, level, false, 0, 1);
  const Run two = forward(m, in.ids, in.off, in.axis, level, false, 0, 3);
  CHECK(all.all_hidden == one.all_hidden);
  CHECK(all.all_hidden == two.all_hidden);
  for (std::size_t l = 0; l < m.config().layers; ++l) {
    CHECK(all.hs[l] == one.hs[l]);
    CHECK(all.ps[l] == one.ps[l]);
    CHECK(all.ctx[l] == one.ctx[l]);
    CHECK(all.hs[l] == two.hs[l]);
  }
  for (double v : all.hs[0]) CHECK(std::isfinite(v));
}

TEST_CASE("LayerNorm: every level vs the scalar reference and the double definition (tails, residual)", "[bert]") {
  // Widths hitting the 8 partial sums' tail and the vectors' (1..17, 384, 385); rows of mixed
  // scale and offset (a large mean makes the variance's cancellation visible); with a residual
  // added first and without. Levels differ from the reference only in the double sums' order and
  // FMA contraction, so the float results agree within a few ulp of each term.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t d : {1, 2, 7, 8, 9, 15, 16, 17, 384, 385})
    for (bool with_res : {false, true}) {
      const std::size_t rows = 5;
      std::vector<float> x(rows * d), res(rows * d), g(d), b(d);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < d; ++i) x[r * d + i] = u(rng) * float(1 + r * 3) + float(r) * 10.0f;
      for (auto& v : res) v = u(rng);
      for (auto& v : g) v = 1.0f + 0.5f * u(rng);
      for (auto& v : b) v = 0.1f * u(rng);
      const float* rp = with_res ? res.data() : nullptr;
      std::vector<float> ref = x;
      layer_norm_rows(SimdLevel::scalar, ref.data(), rp, rows, d, g.data(), b.data(), 1e-12);
      for (SimdLevel level : supported_levels()) {
        INFO("level " << to_string(level) << " d " << d << " residual " << with_res);
        std::vector<float> y = x;
        layer_norm_rows(level, y.data(), rp, rows, d, g.data(), b.data(), 1e-12);
        double worst_ref = 0, worst_def = 0;
        for (std::size_t r = 0; r < rows; ++r) {
          std::vector<double> z(d);
          double mean = 0, var = 0;
          for (std::size_t i = 0; i < d; ++i) mean += z[i] = double(x[r * d + i] + (rp ? rp[r * d + i] : 0.0f));
          mean /= double(d);
          for (std::size_t i = 0; i < d; ++i) var += (z[i] - mean) * (z[i] - mean);
          const double inv = 1.0 / std::sqrt(var / double(d) + 1e-12);
          for (std::size_t i = 0; i < d; ++i) {
            const double want = (z[i] - mean) * inv * g[i] + b[i];
            // x - mean is taken in float: its rounding scales with |x| + |mean|, not |x - mean|.
            const double scale = (std::abs(z[i]) + std::abs(mean)) * inv * std::abs(g[i]) + std::abs(b[i]);
            worst_ref = std::max(worst_ref, std::abs(double(y[r * d + i]) - ref[r * d + i]) / scale);
            worst_def = std::max(worst_def, std::abs(double(y[r * d + i]) - want) / scale);
          }
        }
        CAPTURE(worst_ref, worst_def);
        CHECK(worst_ref < 32.0 / 16777216.0);
        CHECK(worst_def < 32.0 / 16777216.0);
      }
    }
}

TEST_CASE("GELU: within 1e-6 of the exact erf form", "[bert]") {
  std::vector<float> x;
  for (int i = -20000; i <= 20000; ++i) x.push_back(static_cast<float>(i) * 5e-4f);
  for (float v : {-30.0f, -9.0f, 9.0f, 30.0f, 1e-30f, -1e-30f}) x.push_back(v);
  std::vector<float> y = x;
  gelu_inplace(y.data(), y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = 0.5 * double(x[i]) * (1.0 + std::erf(double(x[i]) / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(double(y[i]) - want) / std::max(1.0, std::abs(double(x[i]))));
  }
  CAPTURE(worst);
  CHECK(worst < 1e-6);
}

namespace {

// A tiny BERT (hidden 4, 2 heads, 1 layer, vocab 6) written as config.json + model.safetensors.
struct TinyTensor {
  std::string name, dtype = "F32";
  std::vector<std::uint64_t> shape;
};

std::vector<TinyTensor> tiny_tensors() {
  std::vector<TinyTensor> t = {{"embeddings.word_embeddings.weight", "F32", {6, 4}},
                               {"embeddings.position_embeddings.weight", "F32", {8, 4}},
                               {"embeddings.token_type_embeddings.weight", "F32", {2, 4}},
                               {"embeddings.LayerNorm.weight", "F32", {4}},
                               {"embeddings.LayerNorm.bias", "F32", {4}}};
  const std::string p = "encoder.layer.0.";
  for (const char* s : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
    t.push_back({p + s + ".weight", "F32", {4, 4}});
    t.push_back({p + s + ".bias", "F32", {4}});
  }
  t.push_back({p + "intermediate.dense.weight", "F32", {8, 4}});
  t.push_back({p + "intermediate.dense.bias", "F32", {8}});
  t.push_back({p + "output.dense.weight", "F32", {4, 8}});
  t.push_back({p + "output.dense.bias", "F32", {4}});
  for (const char* s : {"attention.output.LayerNorm", "output.LayerNorm"}) {
    t.push_back({p + s + ".weight", "F32", {4}});
    t.push_back({p + s + ".bias", "F32", {4}});
  }
  return t;
}

void write_tiny(const std::string& dir, const std::vector<TinyTensor>& ts, const std::string& config) {
  json header = json::object();
  std::string data;
  for (const auto& t : ts) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    const std::size_t es = t.dtype == "F32" || t.dtype == "I32" ? 4 : 8;
    std::string bytes(n * es, '\0');
    for (std::uint64_t i = 0; i < n && t.dtype == "F32"; ++i) {
      const float v = 0.01f * float(i % 13) + 0.5f;
      std::memcpy(&bytes[i * 4], &v, 4);
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::string file(8, '\0');
  const std::uint64_t len = h.size();
  std::memcpy(&file[0], &len, 8);
  testutil::write_file(dir + "/model.safetensors", file + h + data);
  testutil::write_file(dir + "/config.json", config);
}

const char* kTinyConfig =
    R"({"model_type": "bert", "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 8, "max_position_embeddings": 8, "type_vocab_size": 2, "vocab_size": 6,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12})";

std::string load_error(const std::string& dir) {
  try {
    BertModel::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("BERT: a bad model is a clear error naming the file and tensor", "[bert]") {
  testutil::TempDir tmp;
  const std::string d = tmp.path.string();
  write_tiny(d, tiny_tensors(), kTinyConfig);
  const BertModel ok = BertModel::load(d);
  CHECK(ok.config().head_dim() == 2);
  {  // runs, and refuses ids outside the vocabulary and reports longer than the positions
    std::vector<std::uint32_t> ids = {0, 5, 3};
    std::vector<std::uint64_t> off = {0, 3};
    std::vector<double> ctx(3), hs(3 * kHeadStats), ps(kPairStats);
    std::vector<BertLayerOut> outs(1);
    outs[0].head_stats = hs.data(), outs[0].pair_stats = ps.data(), outs[0].stride = 1;
    BertScratch s;
    std::vector<float> hidden(3 * 4);
    ok.forward(ids.data(), off.data(), 1, 0, nullptr, SimdLevel::scalar, outs, hidden.data(), s);
    for (float v : hidden) CHECK(std::isfinite(v));
    ids[1] = 6;
    CHECK_THROWS_WITH(ok.forward(ids.data(), off.data(), 1, 0, nullptr, SimdLevel::scalar, outs, nullptr, s),
                      Catch::Contains("token id 6 is outside the vocabulary"));
    std::vector<std::uint32_t> long_ids(9, 1);
    std::vector<std::uint64_t> long_off = {0, 9};
    CHECK_THROWS_WITH(ok.forward(long_ids.data(), long_off.data(), 1, 0, nullptr, SimdLevel::scalar, outs, nullptr, s),
                      Catch::Contains("9 tokens, over the model's 8 positions"));
  }

  auto with_config = [&](const std::string& cfg) {
    write_tiny(d, tiny_tensors(), cfg);
    return load_error(d);
  };
  std::string cfg = kTinyConfig;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = cfg;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  CHECK_THAT(with_config("{not json"), Catch::Contains("config.json:1:3: not valid JSON (invalid literal"));
  CHECK_THAT(with_config(replace("\"bert\"", "\"gpt2\"")), Catch::Contains("unsupported architecture (model_type 'gpt2')"));
  CHECK_THAT(with_config(replace("\"gelu\"", "\"relu\"")), Catch::Contains("unsupported activation hidden_act 'relu'"));
  CHECK_THAT(with_config(replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3")),
             Catch::Contains("not divisible by num_attention_heads 3"));
  CHECK_THAT(with_config(replace("\"hidden_size\": 4,", "")), Catch::Contains("config.json: 'hidden_size' is missing"));
  CHECK_THAT(with_config(replace("\"vocab_size\": 6", "\"vocab_size\": -6")), Catch::Contains("'vocab_size' must be a positive integer"));

  auto with_tensors = [&](const std::vector<TinyTensor>& ts) {
    write_tiny(d, ts, kTinyConfig);
    return load_error(d);
  };
  auto ts = tiny_tensors();
  ts.erase(ts.begin() + 7);  // encoder.layer.0.attention.self.key.weight
  CHECK_THAT(with_tensors(ts), Catch::Contains("tensor 'encoder.layer.0.attention.self.key.weight': missing"));
  ts = tiny_tensors();
  ts[13].shape = {8, 5};  // intermediate.dense.weight
  CHECK_THAT(with_tensors(ts), Catch::Contains("'encoder.layer.0.intermediate.dense.weight'") &&
                                   Catch::Contains("[intermediate_size, hidden_size]"));
  ts = tiny_tensors();
  ts[0].dtype = "I32";
  CHECK_THAT(with_tensors(ts), Catch::Contains("'embeddings.word_embeddings.weight'") && Catch::Contains("I32"));
  std::filesystem::remove(d + "/config.json");
  CHECK_THAT(load_error(d), Catch::Contains("config.json: cannot open"));
}
