// The decoder tests' shared steps (test_decoder.cpp, test_families.cpp): a fixture folder of
// tests/model/fixtures/decoder (made by make_decoder_fixtures.py / make_family_fixtures.py), one
// forward with every output, and the check of a fixture against transformers' recorded hidden
// states and maps and NumPy's metrics.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "test_util.hpp"

namespace decoder_test {

using namespace headsep;
namespace fs = std::filesystem;

inline fs::path fixture(const std::string& name) { return testutil::source_path("tests/model/fixtures/decoder/" + name); }

struct Out {
  std::vector<std::vector<double>> ctx, hs, ps;
  std::vector<std::vector<float>> maps;
  std::vector<float> all_hidden;
};

/// Forward of reports `lens` (ids concatenated), axis[t] = sin(0.7 t + 0.3) within each report.
inline Out run(const Architecture& m, const std::vector<std::uint32_t>& ids, const std::vector<std::uint64_t>& off,
        SimdLevel level) {
  const ModelShape& c = m.shape();
  const std::size_t R = off.size() - 1, H = c.heads, P = H * (H - 1) / 2, T = off.back();
  Out o;
  o.ctx.assign(c.layers, std::vector<double>((H + 1) * R, -7));
  o.hs.assign(c.layers, std::vector<double>((H + 1) * kHeadStats * R, -7));
  o.ps.assign(c.layers, std::vector<double>(P * kPairStats * R + 1, -7));
  std::vector<std::uint64_t> mo(R);
  std::uint64_t acc = 0;
  for (std::size_t r = 0; r < R; ++r) mo[r] = acc, acc += (H + 1) * (off[r + 1] - off[r]) * (off[r + 1] - off[r]);
  o.maps.assign(c.layers, std::vector<float>(acc, -1.0f));
  std::vector<AttentionOut> outs(c.layers);
  for (std::size_t l = 0; l < c.layers; ++l) {
    outs[l].context = o.ctx[l].data(), outs[l].head_stats = o.hs[l].data(), outs[l].pair_stats = o.ps[l].data();
    outs[l].stride = R, outs[l].maps = o.maps[l].data(), outs[l].maps_offset = mo.data();
  }
  std::vector<float> axis(T);
  for (std::size_t r = 0; r < R; ++r)
    for (std::uint64_t t = off[r]; t < off[r + 1]; ++t) axis[t] = static_cast<float>(std::sin(0.7 * double(t - off[r]) + 0.3));
  const float* ax = axis.data();
  o.all_hidden.assign((c.layers + 1) * T * c.hidden, -1.0f);
  ModelScratch s;
  m.forward(ids.data(), off.data(), R, 1, &ax, level, outs, nullptr, s, o.all_hidden.data());
  return o;
}

inline std::vector<std::uint32_t> ref_ids(const SafeTensors& ref, std::size_t n) {
  const auto raw = ref.raw("ids_" + std::to_string(n));
  std::vector<std::int32_t> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  return {v.begin(), v.end()};
}

/// Reports of these lengths back to back, each the recorded ids_N (N = 1, 5, 8, 17; 0 = an empty
/// report): the ids and the offsets (off[0] = 0) a forward takes.
struct Reports {
  std::vector<std::uint32_t> ids;
  std::vector<std::uint64_t> off{0};
};
inline Reports recorded_reports(const SafeTensors& ref, const std::vector<std::size_t>& lengths) {
  Reports r;
  for (const std::size_t n : lengths) {
    if (n) {
      const auto ids = ref_ids(ref, n);
      r.ids.insert(r.ids.end(), ids.begin(), ids.end());
    }
    r.off.push_back(r.ids.size());
  }
  return r;
}

inline bool close_rel(double got, double want, double rel) { return std::abs(got - want) <= rel * std::abs(want) + 1e-7; }

/// Every length of the fixture (the ones the model runs), each alone and all in one call.
/// `dtype`: how the weights are held (a bf16 folder's products at AVX-512 with vdpbf16ps round X
/// to bf16: test_decoder_bf16.cpp holds those to their own tolerance; switch it off to run this).
inline void check_fixture(const std::string& name, std::size_t max_len = 17, WeightDType dtype = WeightDType::automatic) {
  const auto m = load_model(fixture(name), dtype);
  const SafeTensors ref(fixture(name) / "reference.safetensors");
  const ModelShape& c = m->shape();
  const std::size_t H = c.heads, P = H * (H - 1) / 2, D = c.hidden, L = c.layers;
  for (SimdLevel level : supported_levels())
    for (std::size_t n : {1, 5, 8, 17}) {
      if (n > max_len) continue;
      CAPTURE(name, to_string(level), n);
      const auto ids = ref_ids(ref, n);
      const Out o = run(*m, ids, {0, n}, level);
      const auto hid = ref.read_f32("hidden_" + std::to_string(n));
      // Within 1e-4 of the block's largest magnitude (at least 1): Gemma's scaled embeddings are ~10.
      for (std::size_t blk = 0; blk <= L; ++blk) {
        const std::size_t w = n * D;
        double worst = 0, scale = 1;
        for (std::size_t i = blk * w; i < (blk + 1) * w; ++i) {
          worst = std::max(worst, double(std::abs(hid[i] - o.all_hidden[i])));
          scale = std::max(scale, double(std::abs(hid[i])));
        }
        CAPTURE(blk, scale);
        CHECK(worst <= 1e-4 * scale);
      }
      for (std::size_t l = 0; l < L; ++l) {
        const std::string k = std::to_string(n) + "_" + std::to_string(l);
        const auto maps = ref.read_f32("maps_" + k);
        REQUIRE(maps.size() == o.maps[l].size());
        double mw = 0;
        for (std::size_t i = 0; i < maps.size(); ++i) mw = std::max(mw, double(std::abs(maps[i] - o.maps[l][i])));
        CHECK(mw <= 1e-5);
        const auto head = ref.read_f32("head_" + k), ctx = ref.read_f32("ctx_" + k);
        for (std::size_t h = 0; h <= H; ++h) {
          for (std::size_t s = 0; s < kHeadStats; ++s) {
            CAPTURE(l, h, s);
            CHECK(close_rel(o.hs[l][h * kHeadStats + s], head[h * kHeadStats + s], 1e-4));
          }
          CHECK(close_rel(o.ctx[l][h], ctx[h], 1e-4));
        }
        const auto pairs = ref.read_f32("pairs_" + k);
        for (std::size_t p = 0; p < P; ++p)
          for (std::size_t s = 0; s < kPairStats; ++s) {
            CAPTURE(l, p, s);
            CHECK(close_rel(o.ps[l][p * kPairStats + s], pairs[p * kPairStats + s], 1e-4));
          }
      }
    }
}

/// A copy of fixture `name` in a temp folder with config.json edited by `edit` (nullptr: none).
inline fs::path edited(testutil::TempDir& tmp, const std::string& name, void (*edit)(nlohmann::json&)) {
  const fs::path d = tmp.path / name;
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(fixture(name))) fs::copy_file(e.path(), d / e.path().filename());
  if (edit) {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(d / "config.json"));
    edit(j);
    std::ofstream(d / "config.json", std::ios::trunc) << j.dump();
  }
  return d;
}
inline std::string load_error(const fs::path& d) {
  try {
    load_model(d);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

/// `run --model MODEL --profile` over a CSV of two 6-token reports (the ids written into `tmp`),
/// without --dtype: the caller adds it.
inline std::string dtype_job(testutil::TempDir& tmp, const fs::path& model) {
  const std::string ids = tmp.file("ids.csv");
  std::string csv = "report_id,scenario,token,token_id,d\n";
  for (int t = 0; t < 12; ++t) csv += "r" + std::to_string(t / 6) + ",x,t," + std::to_string(3 + 17 * t % 290) + ",0.5\n";
  testutil::write_file(ids, csv);
  return "run -q -s csv -p path=" + testutil::shell_quote(ids) + " -p features=token_id,d -p weights=false --axes d=d --model " +
         testutil::shell_quote(model.string()) + " --profile";
}

/// dtype_job with --dtype auto, f32 and bf16: the products' dtype (auto: `auto_held`) in the
/// --profile line and the summary's options.
inline void check_dtype_runs(testutil::TempDir& tmp, const std::string& job, const std::string& auto_held) {
  for (const std::string dtype : {"auto", "f32", "bf16"}) {
    const auto r = testutil::run_cli(job + " --dtype " + dtype + " --summary " + testutil::shell_quote(tmp.file("s.json")));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string held = dtype == "auto" ? auto_held : dtype;
    CHECK_THAT(r.err, Catch::Contains("held (products " + held + ") from") && Catch::Contains("peak RSS"));
    const auto j = nlohmann::json::parse(testutil::read_file(tmp.file("s.json")));
    bool found = false;
    for (const auto& o : j["run"]["options"].items()) found = found || (o.key() == "dtype" && o.value() == held);
    CHECK(found);
  }
}

}  // namespace decoder_test
