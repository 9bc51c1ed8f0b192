// Safetensors reader and attention-weight loader. Every malformed file is built here from bytes,
// so each bad case is explicit; the torch fixture (tests/data/make_mha_fixture.py) checks the
// loader against what PyTorch itself saved.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "test_util.hpp"

using namespace headsep;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using json = nlohmann::json;
using namespace std::string_literals;

namespace {

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

/// A whole file: header length, header, data — exactly these bytes.
std::string file_bytes(const std::string& header, const std::string& data = {}) {
  return le64(header.size()) + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string s;
  for (float f : v) {
    const auto u = std::bit_cast<std::uint32_t>(f);
    for (int i = 0; i < 4; ++i) s += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  return s;
}

std::string u16_bytes(const std::vector<std::uint16_t>& v) {
  std::string s;
  for (auto u : v) s += {static_cast<char>(u & 0xff), static_cast<char>(u >> 8)};
  return s;
}

/// One tensor of a well-formed file built by build().
struct T {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};
T f32(std::string name, std::vector<std::uint64_t> shape, const std::vector<float>& v) {
  return {std::move(name), "F32", std::move(shape), f32_bytes(v)};
}
/// Values 0.5 + i/64 (exact in f32), distinct per tensor via `base`.
std::vector<float> ramp(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) / 64.0f;
  return v;
}
T f32r(std::string name, std::vector<std::uint64_t> shape, float base) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return f32(std::move(name), std::move(shape), ramp(n, base));
}

/// A well-formed file: offsets in the given order, contiguous.
std::string build(const std::vector<T>& ts, const json& metadata = nullptr) {
  json h = json::object();
  std::string data;
  for (const T& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  return file_bytes(h.dump(), data);
}

/// The message of the Error `f` throws (fails the test when it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no headsep::Error thrown");
  return {};
}

struct Files {
  testutil::TempDir dir;
  std::string put(const std::string& name, const std::string& bytes) {
    const std::string p = dir.file(name);
    testutil::write_file(p, bytes);
    return p;
  }
  /// Opens bytes written to `name` and returns the error message.
  std::string open_error(const std::string& name, const std::string& bytes) {
    const std::string p = put(name, bytes);
    return error_of([&] { SafeTensors st(p); });
  }
};

json load_json(const std::string& rel) { return json::parse(testutil::read_file(testutil::source_path(rel))); }

std::vector<float> floats(const json& data) {
  std::vector<float> v;
  for (const auto& x : data) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

/// Rows [r0, r1) of a row-major matrix with `cols` columns.
std::vector<float> rows(const std::vector<float>& m, std::size_t cols, std::size_t r0, std::size_t r1) {
  return {m.begin() + std::ptrdiff_t(r0 * cols), m.begin() + std::ptrdiff_t(r1 * cols)};
}

/// Exact IEEE binary16 value, computed independently of the reader (via ldexp in double).
double half_value(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + mant, exp - 25);
}

}  // namespace

// ---- the reader ----------------------------------------------------------------------------------

TEST_CASE("safetensors: a well-formed file lists every tensor and reads F32", "[safetensors]") {
  Files f;
  std::string ids;
  for (std::int64_t i = 0; i < 3; ++i) ids += le64(static_cast<std::uint64_t>(i));
  const auto p = f.put("ok.safetensors",
                       build({f32("b", {2, 2}, {1.0f, -2.5f, 0.0f, 3.25f}), {"ids", "I64", {3}, ids},
                              f32("a", {}, {7.0f}), {"empty", "F32", {0, 4}, ""}},
                             json{{"format", "pt"}}));
  const SafeTensors st(p);
  REQUIRE(st.tensors().size() == 4);
  CHECK(st.tensors()[0].name == "a");  // sorted by name
  CHECK(st.tensors()[1].name == "b");
  CHECK(st.metadata().at("format") == "pt");
  CHECK(st.at("ids").dtype == DType::I64);
  CHECK(st.at("ids").shape == std::vector<std::uint64_t>{3});
  CHECK(st.raw("ids").size() == 24);
  CHECK(st.read_f32("b") == std::vector<float>{1.0f, -2.5f, 0.0f, 3.25f});
  CHECK(st.read_f32("b", ShapeSpec{{2, 2}, "[n, n]"}).size() == 4);
  CHECK(st.read_f32("a") == std::vector<float>{7.0f});  // a scalar: shape [], one element
  CHECK(st.read_f32("empty").empty());
  CHECK(st.find("nope") == nullptr);
  // I64 is listed but skipped: reading it as f32 says why.
  CHECK_THAT(error_of([&] { st.read_f32("ids"); }),
             Equals(p + ": tensor 'ids': dtype I64 cannot be read as f32 (F32, F16, BF16 and F64 can)"));
  CHECK_THAT(error_of([&] { st.read_f32("nope"); }), Equals(p + ": tensor 'nope': missing"));
  CHECK_THAT(error_of([&] { st.read_f32("b", ShapeSpec{{4}, {}}); }),
             Equals(p + ": tensor 'b': shape [2, 2], expected [4]"));
}

TEST_CASE("safetensors: shape mismatch names file, tensor, formula and dims", "[safetensors]") {
  Files f;
  const auto p = f.put("mha.safetensors", build({f32r("in_proj_weight", {24, 8}, 0.0f)}));
  const SafeTensors st(p);
  CHECK_THAT(error_of([&] { st.read_f32("in_proj_weight", ShapeSpec{{24, 16}, "[3*d_model, d_model]"}); }),
             Equals(p + ": tensor 'in_proj_weight': shape [24, 8], expected [3*d_model, d_model] = [24, 16]"));
}

TEST_CASE("safetensors: file-level damage is refused before any data is used", "[safetensors]") {
  Files f;
  SECTION("missing file, a folder") {
    CHECK_THAT(error_of([&] { SafeTensors st(f.dir.file("absent.safetensors")); }), Contains("cannot open"));
    CHECK_THAT(error_of([&] { SafeTensors st(f.dir.path); }), Contains("not a regular file"));
  }
  SECTION("shorter than 8 bytes") {
    CHECK_THAT(f.open_error("empty.safetensors", ""), Contains("file is 0 bytes, too short"));
    CHECK_THAT(f.open_error("five.safetensors", "\x10\0\0\0\0"s), Contains("file is 5 bytes, too short"));
  }
  SECTION("header length past the end of the file") {
    const std::string e = f.open_error("long.safetensors", le64(1000) + "{}");
    CHECK_THAT(e, Contains("long.safetensors: header length 1000 runs past the end of the file (10 bytes)"));
    CHECK_THAT(f.open_error("huge.safetensors", le64(~std::uint64_t(0)) + "{}"), Contains("runs past the end"));
    // Truncated inside the header and inside the data.
    const std::string good = build({f32("a", {2}, {1.0f, 2.0f})});
    CHECK_THAT(f.open_error("cut1.safetensors", good.substr(0, 20)), Contains("runs past the end"));
    CHECK_THAT(f.open_error("cut2.safetensors", good.substr(0, good.size() - 1)),
               Contains("tensor 'a': data_offsets [0, 8] outside the data section (7 bytes)"));
  }
  SECTION("absurd header length") {
    // A sparse file longer than the limit, so the length is inside the file but still refused.
    const auto p = f.put("absurd.safetensors", le64(kSafeTensorsMaxHeader + 1) + "{}");
    REQUIRE(::truncate(p.c_str(), static_cast<off_t>(kSafeTensorsMaxHeader + 64)) == 0);
    CHECK_THAT(error_of([&] { SafeTensors st(p); }), Contains("header length 100000001 is absurd"));
  }
  SECTION("invalid JSON") {
    CHECK_THAT(f.open_error("j1.safetensors", file_bytes(R"({"a": {"dtype": "F32",)")), Contains("invalid JSON header"));
    CHECK_THAT(f.open_error("j2.safetensors", file_bytes("[1, 2]")), Contains("header is not a JSON object"));
    CHECK_THAT(f.open_error("j3.safetensors", file_bytes("{\"\xff\": 1}")), Contains("invalid JSON header"));
    CHECK_THAT(f.open_error("j4.safetensors", file_bytes(" {}")), Contains("must start with '{'"));
    CHECK_THAT(f.open_error("j5.safetensors", file_bytes("{} x")), Contains("invalid JSON header"));
  }
  SECTION("trailing spaces in the header are padding") {
    const auto p = f.put("pad.safetensors", file_bytes("{}      "));
    CHECK(SafeTensors(p).tensors().empty());
  }
}

TEST_CASE("safetensors: every header entry is checked", "[safetensors]") {
  Files f;
  const std::string d8 = f32_bytes({1.0f, 2.0f});
  auto entry = [&](const std::string& body, const std::string& data) {
    return f.open_error("e.safetensors", file_bytes(R"({"w": )" + body + "}", data));
  };
  CHECK_THAT(entry("5", d8), Contains("e.safetensors: tensor 'w': entry is not a JSON object"));
  CHECK_THAT(entry(R"({"dtype": "Q8", "shape": [2], "data_offsets": [0, 8]})", d8),
             Contains("tensor 'w': unknown dtype 'Q8'"));
  CHECK_THAT(entry(R"({"dtype": "F4", "shape": [16], "data_offsets": [0, 8]})", d8), Contains("unknown dtype 'F4'"));
  CHECK_THAT(entry(R"({"shape": [2], "data_offsets": [0, 8]})", d8), Contains("tensor 'w': no dtype string"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})", d8),
             Contains("tensor 'w': shape [-2] has a dimension that is not a non-negative integer"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]})", d8),
             Contains("not a non-negative integer"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]})", d8),
             Contains("not a non-negative integer"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": 2, "data_offsets": [0, 8]})", d8), Contains("no shape array"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})", d8),
             Contains("data_offsets is not [begin, end]"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2], "data_offsets": [-1, 8]})", d8),
             Contains("data_offsets is not [begin, end]"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})", d8), Contains("begin after end"));
  CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1})", d8),
             Contains("unexpected key 'x'"));
  SECTION("byte size must be product(shape) * dtype size") {
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})", d8),
               Contains("tensor 'w': data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12"));
    CHECK_THAT(entry(R"({"dtype": "F16", "shape": [2], "data_offsets": [0, 8]})", d8),
               Contains("of F16 needs 4"));
  }
  SECTION("overflow-checked sizes") {
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 8]})", d8),
               Contains("more than 2^64 elements"));
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [4611686018427387905], "data_offsets": [0, 8]})", d8),
               Contains("more than 2^64 bytes"));
    // Wraps to exactly 8 bytes in 64-bit arithmetic if unchecked: 2^62 + 2 elements of 4 bytes.
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [4611686018427387906], "data_offsets": [0, 8]})", d8),
               Contains("more than 2^64 bytes"));
  }
  SECTION("offsets outside the data section") {
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 16]})", d8),
               Contains("tensor 'w': data_offsets [0, 16] outside the data section (8 bytes)"));
    CHECK_THAT(entry(R"({"dtype": "F32", "shape": [2], "data_offsets": [18446744073709551608, 18446744073709551615]})", d8),
               Contains("outside the data section"));
  }
  SECTION("__metadata__ must map strings to strings") {
    CHECK_THAT(f.open_error("m.safetensors", file_bytes(R"({"__metadata__": [1]})")),
               Contains("__metadata__ is not a JSON object"));
    CHECK_THAT(f.open_error("m.safetensors", file_bytes(R"({"__metadata__": {"k": 1}})")),
               Contains("__metadata__ entry 'k' is not a string"));
  }
}

TEST_CASE("safetensors: tensors tile the data section exactly", "[safetensors]") {
  Files f;
  const std::string d12 = f32_bytes({1, 2, 3}), d16 = f32_bytes({1, 2, 3, 4});
  SECTION("overlapping tensors") {
    const std::string h =
        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
    CHECK_THAT(f.open_error("o.safetensors", file_bytes(h, d12)),
               Equals(f.dir.file("o.safetensors") + ": tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]"));
    const std::string same =
        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
    CHECK_THAT(f.open_error("o2.safetensors", file_bytes(same, f32_bytes({1, 2}))), Contains("overlap tensor"));
  }
  SECTION("holes and trailing bytes") {
    const std::string h =
        R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
    CHECK_THAT(f.open_error("h.safetensors", file_bytes(h, d16)),
               Contains("bytes [4, 8) of the data section belong to no tensor"));
    const std::string t = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
    CHECK_THAT(f.open_error("t.safetensors", file_bytes(t, d12)),
               Contains("bytes [8, 12) at the end of the data section belong to no tensor"));
  }
  SECTION("a name twice") {
    const std::string h =
        R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
    CHECK_THAT(f.open_error("d.safetensors", file_bytes(h, f32_bytes({1, 2}))),
               Contains("tensor 'a': appears twice in the header"));
  }
}

TEST_CASE("safetensors: F16 converts exactly, every bit pattern", "[safetensors]") {
  Files f;
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
  const auto p = f.put("f16.safetensors", build({{"h", "F16", {256, 256}, u16_bytes(all)}}));
  const SafeTensors st(p);
  const auto v = st.read_f32("h", std::nullopt, SafeTensors::NonFinite::allow);
  REQUIRE(v.size() == 65536);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const double want = half_value(static_cast<std::uint16_t>(i));
    const bool ok = std::isnan(want) ? std::isnan(v[i]) : (double(v[i]) == want && std::signbit(v[i]) == std::signbit(want));
    bad += !ok;
  }
  CHECK(bad == 0);
  CHECK(v[0x0001] == 0x1p-24f);                  // smallest subnormal
  CHECK(v[0x03ff] == 1023 * 0x1p-24f);           // largest subnormal
  CHECK(v[0x7bff] == 65504.0f);                  // largest finite
  CHECK(std::signbit(v[0x8000]));                // -0
  // Non-finite weights are refused by default, naming tensor and element.
  CHECK_THAT(error_of([&] { st.read_f32("h"); }),
             Equals(p + ": tensor 'h': element [124, 0] is inf (weights must be finite)"));
  const auto q = f.put("nan.safetensors", build({{"w", "F16", {3}, u16_bytes({0x3c00, 0xfc00, 0x7e00})}}));
  CHECK_THAT(error_of([&] { SafeTensors(q).read_f32("w"); }), Contains("tensor 'w': element 1 is -inf"));
  const auto r = f.put("nan2.safetensors", build({{"w", "F16", {2}, u16_bytes({0x3c00, 0x7e00})}}));
  CHECK_THAT(error_of([&] { SafeTensors(r).read_f32("w"); }), Contains("tensor 'w': element 1 is NaN"));
}

TEST_CASE("safetensors: BF16 and F64 convert", "[safetensors]") {
  Files f;
  // bf16: the top half of an f32. 0x0001 = 2^-133 (smallest subnormal), 0x7f7f = largest finite.
  const std::vector<std::uint16_t> b = {0x3f80, 0xbfc0, 0x0001, 0x8000, 0x7f7f, 0x0080, 0x3eab};
  const std::vector<float> want = {1.0f, -1.5f, 0x1p-133f, -0.0f, 0x1.fep127f, 0x1p-126f, 0x1.56p-2f};
  std::string d;
  for (double x : {0.1, -2.0, 1e300, 3.0}) d += le64(std::bit_cast<std::uint64_t>(x));
  const auto p = f.put("bf.safetensors", build({{"b", "BF16", {7}, u16_bytes(b)}, {"d", "F64", {4}, d},
                                                {"d2", "F64", {2}, d.substr(0, 16)},
                                                {"inf", "BF16", {1}, u16_bytes({0x7f80})}}));
  const SafeTensors st(p);
  const auto v = st.read_f32("b");
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(v[i] == want[i]);
    CHECK(std::signbit(v[i]) == std::signbit(want[i]));
  }
  CHECK(st.read_f32("d2") == std::vector<float>{0.1f, -2.0f});  // rounded to nearest
  CHECK_THAT(error_of([&] { st.read_f32("d"); }), Contains("tensor 'd': element 2 is inf as f32"));
  CHECK_THAT(error_of([&] { st.read_f32("inf"); }), Contains("tensor 'inf': element 0 is inf"));
}

TEST_CASE("safetensors: the reader is movable and unmaps once", "[safetensors]") {
  Files f;
  const auto p = f.put("m.safetensors", build({f32("a", {2}, {1.0f, 2.0f})}));
  SafeTensors a(p);
  SafeTensors b(std::move(a));
  CHECK(b.read_f32("a") == std::vector<float>{1.0f, 2.0f});
  CHECK(a.tensors().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  const auto q = f.put("n.safetensors", build({f32("z", {1}, {3.0f})}));
  SafeTensors c(q);
  c = std::move(b);
  CHECK(c.read_f32("a") == std::vector<float>{1.0f, 2.0f});
  CHECK(c.file() == p);
  std::vector<SafeTensors> many;
  for (int i = 0; i < 8; ++i) many.emplace_back(p);  // reallocation moves them
  for (const auto& s : many) CHECK(s.read_f32("a")[1] == 2.0f);
}

TEST_CASE("safetensors: torch-written dtypes (F16, BF16, F64 converted as torch casts, I64 and BOOL skipped)",
          "[safetensors][fixture]") {
  const json ex = load_json("tests/data/mha_small_expected.json");
  const SafeTensors st(testutil::source_path("tests/data/mha_small_dtypes.safetensors"));
  for (const char* name : {"w.f16", "w.bf16", "w.f64"}) {
    INFO(name);
    const auto& e = ex["dtypes"][name];
    const auto v = st.read_f32(name, ShapeSpec{e["shape"].get<std::vector<std::uint64_t>>(), {}});
    const auto w = floats(e["data"]);
    REQUIRE(v.size() == w.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      CHECK(v[i] == w[i]);
      CHECK(std::signbit(v[i]) == std::signbit(w[i]));
    }
  }
  CHECK(st.at("w.f16").dtype == DType::F16);
  CHECK(st.at("w.bf16").dtype == DType::BF16);
  CHECK(st.at("ids.i64").dtype == DType::I64);
  CHECK(st.at("ids.i64").shape == std::vector<std::uint64_t>{2, 3});
  CHECK(st.at("mask.bool").dtype == DType::BOOL);
  CHECK_THAT(error_of([&] { st.read_f32("mask.bool"); }), Contains("dtype BOOL cannot be read as f32"));
}

// ---- the attention loader ------------------------------------------------------------------------

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
