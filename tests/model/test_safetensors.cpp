// Safetensors reader: every malformed file is built here from bytes (safetensors_files.hpp), so
// each bad case is explicit; the torch-written fixtures check the dtypes PyTorch itself saves.
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
#include "model/safetensors_files.hpp"
#include "test_util.hpp"

using namespace headsep;
using namespace safetensors_test;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using json = nlohmann::json;
using namespace std::string_literals;

namespace {

std::string u16_bytes(const std::vector<std::uint16_t>& v) {
  std::string s;
  for (auto u : v) s += {static_cast<char>(u & 0xff), static_cast<char>(u >> 8)};
  return s;
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
    CHECK_THAT(f.open_error("j1.safetensors", file_bytes(R"({"a": {"dtype": "F32",)")),
               Contains("JSON header, line 1, column 23: not valid JSON (unexpected end of input"));
    CHECK_THAT(f.open_error("j2.safetensors", file_bytes("[1, 2]")), Contains("header is not a JSON object"));
    CHECK_THAT(f.open_error("j3.safetensors", file_bytes("{\"\xff\": 1}")),
               Contains("JSON header, line 1, column 3: not valid JSON (invalid string: ill-formed UTF-8 byte"));
    CHECK_THAT(f.open_error("j4.safetensors", file_bytes(" {}")), Contains("must start with '{'"));
    CHECK_THAT(f.open_error("j5.safetensors", file_bytes("{} x")),
               Contains("JSON header, line 1, column 4: not valid JSON ("));
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
