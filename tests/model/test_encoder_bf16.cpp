// An encoder held in bf16 (docs/MODEL.md "Weight dtype"; model/bert.cpp): the roberta and
// distilbert fixtures' weights rounded to bf16 and written twice, once as BF16 and once as F32
// holding the same (bf16-exact) values, so the f32 path on the second is the reference whose
// bits the widening bf16 path must give, and against which the vdpbf16ps path is bounded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/packed_linear.hpp"
#include "model/decoder_fixture.hpp"
#include "model/safetensors_files.hpp"
#include "test_util.hpp"

using namespace headsep;
using namespace decoder_test;

namespace {

/// DIR/<name>-f32 and DIR/<name>-bf16: fixture `name`'s tensors rounded to bf16 (nearest even),
/// stored as F32 and as BF16.
struct Folders {
  fs::path f32, bf16;
};

Folders bf16_copies(testutil::TempDir& tmp, const std::string& name) {
  const SafeTensors src(fixture(name) / "model.safetensors");
  std::vector<safetensors_test::T> as_f32, as_bf16;
  for (const TensorInfo& t : src.tensors()) {
    const auto v = src.read_f32(t.name);
    std::vector<float> r(v.size());
    std::string bytes;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t b = kernels::round_bf16(std::bit_cast<std::uint32_t>(v[i]));
      r[i] = std::bit_cast<float>(std::uint32_t(b) << 16);
      bytes += static_cast<char>(b & 0xff), bytes += static_cast<char>(b >> 8);
    }
    as_f32.push_back(safetensors_test::f32(t.name, t.shape, r));
    as_bf16.push_back({t.name, "BF16", t.shape, bytes});
  }
  Folders f{fs::path(tmp.file(name + "-f32")), fs::path(tmp.file(name + "-bf16"))};
  for (const auto& [dir, ts] : {std::pair{f.f32, &as_f32}, std::pair{f.bf16, &as_bf16}}) {
    fs::create_directories(dir);
    fs::copy_file(fixture(name) / "config.json", dir / "config.json");
    testutil::write_file((dir / "model.safetensors").string(), safetensors_test::build(*ts));
  }
  return f;
}

/// Reports of 5, 1, 17 and 8 tokens (ids within both fixtures' vocabularies, no padding id).
const std::vector<std::uint64_t> kOff{0, 5, 6, 23, 31};
std::vector<std::uint32_t> ids() {
  std::vector<std::uint32_t> v(kOff.back());
  for (std::size_t t = 0; t < v.size(); ++t) v[t] = static_cast<std::uint32_t>(3 + 17 * t % 290);
  return v;
}

bool same_bits(const Out& a, const Out& b) {
  return a.all_hidden == b.all_hidden && a.maps == b.maps && a.hs == b.hs && a.ctx == b.ctx && a.ps == b.ps;
}

/// Turns vdpbf16ps off for the scope (the widening path at AVX-512), back on after.
struct NoDot {
  NoDot() { kernels::set_bf16_dot(false); }
  ~NoDot() { kernels::set_bf16_dot(true); }
};

}  // namespace

TEST_CASE("bf16 encoders: the widening path gives the f32 path's bits at every level", "[bert][bf16]") {
  testutil::TempDir tmp;
  for (const char* name : {"roberta", "distilbert"}) {
    CAPTURE(name);
    const Folders f = bf16_copies(tmp, name);
    const auto ref = load_model(f.f32), b16 = load_model(f.bf16);
    CHECK(ref->weight_memory().linear == "f32");
    CHECK(b16->weight_memory().linear == "bf16");
    // --dtype bf16 on the f32 folder holds the same (exact) values; --dtype f32 on the bf16 one is the f32 path.
    const auto rounded = load_model(f.f32, WeightDType::bf16), widened = load_model(f.bf16, WeightDType::f32);
    CHECK(rounded->weight_memory().linear == "bf16");
    CHECK(widened->weight_memory().linear == "f32");
    CHECK_THAT(testutil::run_cli("info --model " + testutil::shell_quote(f.bf16.string())).out,
               Catch::Contains("products:       bf16"));
    const std::size_t table = std::size_t(ref->shape().vocab_size) * ref->shape().hidden;
    CHECK(std::equal(ref->input_embeddings(), ref->input_embeddings() + table, b16->input_embeddings()));
    const NoDot no_dot;
    for (SimdLevel level : supported_levels()) {
      CAPTURE(to_string(level));
      const Out want = run(*ref, ids(), kOff, level);
      CHECK(same_bits(run(*b16, ids(), kOff, level), want));
      CHECK(same_bits(run(*rounded, ids(), kOff, level), want));
      CHECK(same_bits(run(*widened, ids(), kOff, level), want));
    }
  }
}

TEST_CASE("bf16 encoders: vdpbf16ps within the decoders' bounds of the f32 path", "[bert][bf16]") {
  if (!kernels::bf16_dot_active()) {
    WARN("this CPU has no AVX512-BF16: the vdpbf16ps path is not tested here (its widening path is exact)");
    return;
  }
  testutil::TempDir tmp;
  for (const char* name : {"roberta", "distilbert"}) {
    CAPTURE(name);
    const Folders f = bf16_copies(tmp, name);
    const auto ref = load_model(f.f32), b16 = load_model(f.bf16);
    const Out want = run(*ref, ids(), kOff, SimdLevel::avx512), got = run(*b16, ids(), kOff, SimdLevel::avx512);
    // test_decoder_bf16.cpp's absolute bounds, in u = 2^-9: the only rounding vdpbf16ps adds is X's
    // to bf16 before each product. Hidden block b within 4·b·u of its scale (block 0, the
    // embeddings, exact), maps within 8 u, metrics within 4 u (|Δ| / (|value| + 1)).
    constexpr double u = 0x1p-9;
    const ModelShape& c = ref->shape();
    const std::size_t w = kOff.back() * c.hidden;
    for (std::size_t b = 0; b <= c.layers; ++b) {
      double worst = 0, scale = 1;
      for (std::size_t i = b * w; i < (b + 1) * w; ++i) {
        worst = std::max(worst, std::abs(double(got.all_hidden[i]) - want.all_hidden[i]));
        scale = std::max(scale, double(std::abs(want.all_hidden[i])));
      }
      CAPTURE(b, worst / scale);
      CHECK(worst / scale <= 4 * double(b) * u);
    }
    for (std::size_t l = 0; l < c.layers; ++l) {
      double maps = 0, metrics = 0;
      for (std::size_t i = 0; i < want.maps[l].size(); ++i)
        maps = std::max(maps, std::abs(double(got.maps[l][i]) - want.maps[l][i]));
      for (auto v : {&Out::hs, &Out::ctx, &Out::ps})
        for (std::size_t i = 0; i < (want.*v)[l].size(); ++i)
          metrics = std::max(metrics, std::abs((got.*v)[l][i] - (want.*v)[l][i]) / (std::abs((want.*v)[l][i]) + 1.0));
      CAPTURE(l, maps, metrics);
      CHECK(maps <= 8 * u);
      CHECK(metrics <= 4 * u);
    }
  }
}

TEST_CASE("bf16 encoders: weights held are about half the f32 path's", "[bert][bf16]") {
  testutil::TempDir tmp;
  const Folders f = bf16_copies(tmp, "roberta");
  const WeightMemory m32 = load_model(f.f32)->weight_memory(), m16 = load_model(f.bf16)->weight_memory();
  const WeightMemory kept = load_model(fixture("roberta"), WeightDType::bf16)->weight_memory();
  CHECK(m16.file * 2 == m32.file);
  CHECK(kept.held == m16.held);
  // Products, tables in 2 bytes; the biases and norms (f32 in both) and the panels' padding make
  // the rest. Tiny model: hidden 36, 2 layers.
  const double ratio = double(m16.held) / double(m32.held);
  CAPTURE(m16.held, m32.held, ratio);
  CHECK(ratio >= 0.5);
  CHECK(ratio <= 0.55);
}

TEST_CASE("run --model --dtype on an encoder: the products' dtype in the summary and --profile", "[bert][bf16][cli]") {
  testutil::TempDir tmp;
  check_dtype_runs(tmp, dtype_job(tmp, fixture("roberta")), "f32");
}
