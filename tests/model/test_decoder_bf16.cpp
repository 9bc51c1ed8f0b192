// A bf16 decoder held in bf16 (kernels/packed_linear.hpp, docs/MODEL.md "Weight dtype"): which
// dtype the loader keeps, and the accuracy of the vdpbf16ps products against transformers run in
// f32 on the same weights (reference.safetensors) and in bf16 (reference-bf16.safetensors), on the
// llama-bf16 fixture (make_decoder_fixtures.py). The widening path's bits are test_decoder.cpp's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/packed_linear.hpp"
#include "model/decoder_fixture.hpp"
#include "test_util.hpp"

using namespace headsep;
using namespace decoder_test;

namespace {

/// Worst differences of one forward against a reference file, per hidden block (relative to the
/// block's largest magnitude, at least 1), per layer's maps (absolute) and metrics (|Δ| / (|value| + 1): relative above 1, absolute below).
struct Errors {
  std::vector<double> hidden, maps, metrics;
};

template <class Hidden, class Maps, class Metric>
Errors errors_of(const SafeTensors& ref, std::size_t n, const ModelShape& c, Hidden hidden, Maps maps, Metric metric) {
  Errors e;
  const auto hid = ref.read_f32("hidden_" + std::to_string(n));
  const std::size_t w = n * c.hidden;
  for (std::size_t blk = 0; blk <= c.layers; ++blk) {
    double worst = 0, scale = 1;
    for (std::size_t i = blk * w; i < (blk + 1) * w; ++i) {
      worst = std::max(worst, std::abs(double(hid[i]) - hidden(i)));
      scale = std::max(scale, double(std::abs(hid[i])));
    }
    e.hidden.push_back(worst / scale);
  }
  const std::size_t H = c.heads, P = H * (H - 1) / 2;
  for (std::size_t l = 0; l < c.layers; ++l) {
    const std::string k = std::to_string(n) + "_" + std::to_string(l);
    const auto m = ref.read_f32("maps_" + k);
    double mw = 0;
    for (std::size_t i = 0; i < m.size(); ++i) mw = std::max(mw, std::abs(double(m[i]) - maps(l, i)));
    e.maps.push_back(mw);
    const auto head = ref.read_f32("head_" + k), ctx = ref.read_f32("ctx_" + k), pairs = ref.read_f32("pairs_" + k);
    double tw = 0;
    auto err = [&](double got, double want) { tw = std::max(tw, std::abs(got - want) / (std::abs(want) + 1.0)); };
    for (std::size_t i = 0; i < (H + 1) * kHeadStats; ++i) err(metric(l, 0, i), head[i]);
    for (std::size_t h = 0; h <= H; ++h) err(metric(l, 1, h), ctx[h]);
    for (std::size_t i = 0; i < P * kPairStats; ++i) err(metric(l, 2, i), pairs[i]);
    e.metrics.push_back(tw);
  }
  return e;
}

}  // namespace

TEST_CASE("bf16 and f16 folders stay so unless --dtype f32, and --dtype bf16 rounds an f32 folder", "[decoder][bf16]") {
  const auto kept = load_model(fixture("llama-bf16"));
  const auto widened = load_model(fixture("llama-bf16"), WeightDType::f32);
  CHECK(kept->weight_memory().linear == "bf16");
  CHECK(widened->weight_memory().linear == "f32");
  CHECK(kept->weight_memory().file == widened->weight_memory().file);
  CHECK(kept->weight_memory().held < widened->weight_memory().held);
  CHECK(load_model(fixture("llama"))->weight_memory().linear == "f32");
  CHECK(load_model(fixture("llama"), WeightDType::bf16)->weight_memory().linear == "bf16");
  // The table held as bf16 is the same values: input_embeddings() widens it (exactly).
  const std::size_t table = std::size_t(kept->shape().vocab_size) * kept->shape().hidden;
  CHECK(std::equal(kept->input_embeddings(), kept->input_embeddings() + table, widened->input_embeddings()));
  CHECK(parse_weight_dtype("auto") == WeightDType::automatic);
  CHECK_THROWS_WITH(parse_weight_dtype("f16"), Catch::Contains("expected auto, f32 or bf16"));
  // An f16 folder (the gemma family fixture) stays f16 (its products and table; test_families.cpp
  // holds it to transformers at every level, the f32 path's bits), unless --dtype says otherwise.
  const auto f16 = load_model(fixture("gemma")), f16_widened = load_model(fixture("gemma"), WeightDType::f32);
  CHECK(f16->weight_memory().linear == "f16");
  CHECK(f16_widened->weight_memory().linear == "f32");
  CHECK(load_model(fixture("gemma"), WeightDType::bf16)->weight_memory().linear == "bf16");
  const std::size_t gt = std::size_t(f16->shape().vocab_size) * f16->shape().hidden;
  CHECK(std::equal(f16->input_embeddings(), f16->input_embeddings() + gt, f16_widened->input_embeddings()));
  // (Encoders: test_encoder_bf16.cpp.)
}

TEST_CASE("bf16 products with vdpbf16ps against transformers in f32 and in bf16", "[decoder][bf16]") {
  if (!kernels::bf16_dot_active()) {
    WARN("this CPU has no AVX512-BF16: the vdpbf16ps path is not tested here (its widening path is exact)");
    return;
  }
  const auto m = load_model(fixture("llama-bf16"));
  const ModelShape& c = m->shape();
  const SafeTensors f32(fixture("llama-bf16") / "reference.safetensors");
  const SafeTensors b16(fixture("llama-bf16") / "reference-bf16.safetensors");
  for (std::size_t n : {1, 5, 8, 17}) {
    CAPTURE(n);
    const auto ids = ref_ids(f32, n);
    const Out o = run(*m, ids, {0, n}, SimdLevel::avx512);
    const Errors ours = errors_of(
        f32, n, c, [&](std::size_t i) { return double(o.all_hidden[i]); },
        [&](std::size_t l, std::size_t i) { return double(o.maps[l][i]); },
        [&](std::size_t l, int kind, std::size_t i) {
          return kind == 0 ? o.hs[l][i] : kind == 1 ? o.ctx[l][i] : o.ps[l][i];
        });
    // transformers in bf16, read from its own recording, against the same f32 reference.
    const auto bh = b16.read_f32("hidden_" + std::to_string(n));
    std::vector<std::vector<float>> bm, bhs, bctx, bps;
    for (std::size_t l = 0; l < c.layers; ++l) {
      const std::string k = std::to_string(n) + "_" + std::to_string(l);
      bm.push_back(b16.read_f32("maps_" + k)), bhs.push_back(b16.read_f32("head_" + k));
      bctx.push_back(b16.read_f32("ctx_" + k)), bps.push_back(b16.read_f32("pairs_" + k));
    }
    const Errors theirs = errors_of(
        f32, n, c, [&](std::size_t i) { return double(bh[i]); }, [&](std::size_t l, std::size_t i) { return double(bm[l][i]); },
        [&](std::size_t l, int kind, std::size_t i) {
          return double(kind == 0 ? bhs[l][i] : kind == 1 ? bctx[l][i] : bps[l][i]);
        });
    // Tolerances in u = 2^-9, half bf16's unit roundoff (2^-8: 8 significant bits, nearest even):
    // the only rounding the vdpbf16ps products add is X's to bf16 (relative <= 2u per element)
    // before each product. Two criteria, both held:
    //  - never worse than transformers' own bf16 run against the same f32 reference, or within u
    //    where that run happens to be closer (measured: ours 0.4-1.0x transformers' error);
    //  - absolute: hidden block l within 4·l·u of its scale (X rounded once per product, errors
    //    growing by about u per layer; measured at most 2.2 u at l = 2), maps within 8 u,
    //    metrics within 4 u (|Δ| / (|value| + 1); measured at most 0.5 u).
    constexpr double u = 0x1p-9;
    for (std::size_t b = 0; b <= c.layers; ++b) {
      CAPTURE(b, ours.hidden[b], theirs.hidden[b]);
      CHECK(ours.hidden[b] <= std::max(theirs.hidden[b], u));
      CHECK(ours.hidden[b] <= 4 * double(b) * u);
    }
    for (std::size_t l = 0; l < c.layers; ++l) {
      CAPTURE(l, ours.maps[l], theirs.maps[l], ours.metrics[l], theirs.metrics[l]);
      CHECK(ours.maps[l] <= std::max(theirs.maps[l], u));
      CHECK(ours.maps[l] <= 8 * u);
      CHECK(ours.metrics[l] <= std::max(theirs.metrics[l], u));
      CHECK(ours.metrics[l] <= 4 * u);
    }
  }
}

TEST_CASE("bf16 decoder: reports grouped or alone give the same bits at every level", "[decoder][bf16]") {
  const auto m = load_model(fixture("llama-bf16"));
  const SafeTensors ref(fixture("llama-bf16") / "reference.safetensors");
  const auto [all, off] = recorded_reports(ref, {5, 1, 17, 8});
  for (SimdLevel level : supported_levels()) {
    CAPTURE(to_string(level));
    const Out together = run(*m, all, off, level);
    const std::size_t D = m->shape().hidden, T = all.size();
    for (std::size_t r = 0; r + 1 < off.size(); ++r) {
      const std::vector<std::uint32_t> one(all.begin() + off[r], all.begin() + off[r + 1]);
      const std::size_t n = one.size();
      const Out alone = run(*m, one, {0, n}, level);
      for (std::size_t b = 0; b <= m->shape().layers; ++b)
        CHECK(std::equal(alone.all_hidden.begin() + b * n * D, alone.all_hidden.begin() + (b + 1) * n * D,
                         together.all_hidden.begin() + b * T * D + off[r] * D));
    }
  }
}

TEST_CASE("run --model --dtype: the products' dtype in the summary, weights and peak RSS in --profile", "[decoder][bf16][cli]") {
  testutil::TempDir tmp;
  const std::string job = dtype_job(tmp, fixture("llama-bf16"));
  check_dtype_runs(tmp, job, "bf16");
  const auto bad = testutil::run_cli(job + " --dtype f16");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.err, Catch::Contains("expected auto, f32 or bf16"));
}
