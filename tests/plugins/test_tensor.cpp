// The `tensor` scenario generator: embeddings (and feature columns) from a safetensors file.
// Fixture files are built here from bytes: [B, n, d] and ragged [T, d] + offsets, F32/F16/BF16/F64,
// features named by __metadata__, report ids and selection, random access from several threads,
// every refused file naming the file and the tensor, and the CLI end to end.
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin_host.hpp"
#include "plugins/safetensors_bytes.hpp"
#include "test_util.hpp"

using namespace headsep;
using testutil::TempDir;
using testutil::bytes_of;
using testutil::safetensors;
using testutil::Tensor;

namespace {

std::string f16_bytes(const std::vector<float>& v) {  // exact for the small binary fractions used here
  std::vector<std::uint16_t> h;
  for (float f : v) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (b >> 16) & 0x8000u;
    const int exp = int((b >> 23) & 0xff) - 127 + 15;
    if ((b & 0x7fffffffu) == 0) h.push_back(std::uint16_t(sign));
    else h.push_back(std::uint16_t(sign | (std::uint32_t(exp) << 10) | ((b >> 13) & 0x3ffu)));
  }
  return bytes_of(h);
}

std::string bf16_bytes(const std::vector<float>& v) {
  std::vector<std::uint16_t> h;
  for (float f : v) h.push_back(std::uint16_t(std::bit_cast<std::uint32_t>(f) >> 16));
  return bytes_of(h);
}

std::vector<float> iota_f(std::size_t n, float scale = 0.25f, float shift = -3.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = shift + scale * float(i % 41);  // exact in f16/bf16
  return v;
}

const std::map<std::string, std::string> kSeedMeta = {{"features", "decision_axis,evidence_axis,condition_axis"}};

PluginRegistry builtins() { return PluginRegistry::discover({builtin_plugin_dir()}); }

std::unique_ptr<ReportSource> open_tensor(const PluginRegistry& reg, const std::string& path, PluginParams extra = {}) {
  PluginParams p{{"path", path}};
  p.insert(p.end(), extra.begin(), extra.end());
  return open_scenario_plugin(reg, "tensor", p);
}

std::string error_of(const PluginRegistry& reg, const std::string& path, PluginParams extra = {}) {
  try {
    auto src = open_tensor(reg, path, extra);
    ReportBatch b;
    while (src->next(b, 4)) {
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// B = 5 reports of n = 3 tokens, d_model = 4, features [15, 3].
struct Uniform {
  std::vector<float> x = iota_f(5 * 3 * 4), f = iota_f(15 * 3, 0.5f, -1.0f);
  std::string file(const std::string& dtype = "F32") const {
    std::string xb = dtype == "F16" ? f16_bytes(x) : dtype == "BF16" ? bf16_bytes(x) : bytes_of(x);
    if (dtype == "F64") xb = bytes_of(std::vector<double>(x.begin(), x.end()));
    return safetensors({{"x", dtype, {5, 3, 4}, xb}, {"features", "F32", {15, 3}, bytes_of(f)}}, kSeedMeta);
  }
};

}  // namespace

TEST_CASE("tensor: [B, n, d_model] with named features, every dtype, chunk by chunk", "[tensor]") {
  TempDir tmp;
  auto reg = builtins();
  const auto* info = reg.find("tensor");
  REQUIRE(info);
  CHECK(info->kind == PluginKind::scenario);
  Uniform u;
  for (const std::string dtype : {"F32", "F16", "BF16", "F64"}) {
    DYNAMIC_SECTION(dtype) {
      const auto path = tmp.file("x-" + dtype + ".safetensors");
      testutil::write_file(path, u.file(dtype));
      auto src = open_tensor(reg, path);
      const Schema& s = src->schema();
      CHECK(s.feature_names == std::vector<std::string>{"decision_axis", "evidence_axis", "condition_axis"});
      CHECK(s.d_model == 4);
      CHECK(src->random_access());
      CHECK(src->total_reports() == 5);
      ReportBatch b;
      std::uint64_t seen = 0;
      for (std::uint64_t i = 0; src->fill(i, 2, b); ++i) {
        CHECK(b.first_report == 2 * i);
        REQUIRE(b.n_reports() == (i < 2 ? 2u : 1u));
        for (std::size_t r = 0; r <= b.n_reports(); ++r) CHECK(b.token_offset[r] == 3 * r);
        REQUIRE(b.embeddings.size() == b.n_tokens() * 4);
        const std::size_t t0 = 2 * i * 3;
        for (std::size_t k = 0; k < b.embeddings.size(); ++k) CHECK(b.embeddings[k] == u.x[t0 * 4 + k]);
        REQUIRE(b.features.size() == 3);
        for (std::size_t c = 0; c < 3; ++c)
          for (std::size_t t = 0; t < b.n_tokens(); ++t) CHECK(b.features[c][t] == double(u.f[(t0 + t) * 3 + c]));
        CHECK(b.report_ids.empty());  // synthetic #<index>
        seen += b.n_reports();
      }
      CHECK(seen == 5);
    }
  }
}

TEST_CASE("tensor: ragged [T, d_model] + offsets (I64, I32), columns and x[i], no features tensor", "[tensor]") {
  TempDir tmp;
  auto reg = builtins();
  const std::vector<std::int64_t> off{0, 1, 4, 6};  // reports of 1, 3, 2 tokens
  const auto x = iota_f(6 * 3);
  const auto f = iota_f(6 * 2, 1.0f, 0.0f);
  for (const std::string otype : {"I64", "I32"}) {
    DYNAMIC_SECTION(otype) {
      const std::string ob = otype == "I64" ? bytes_of(off) : bytes_of(std::vector<std::int32_t>(off.begin(), off.end()));
      const auto path = tmp.file("r.safetensors");
      testutil::write_file(path, safetensors({{"emb", "F32", {6, 3}, bytes_of(x)}, {"offsets", otype, {4}, ob},
                                              {"feat", "F32", {6, 2}, bytes_of(f)}}));
      // Unnamed feature columns are f0, f1; x[2] reads embedding component 2.
      auto src = open_tensor(reg, path, {{"x", "emb"}, {"feature_tensor", "feat"}, {"features", "f1,x[2],f1"}});
      CHECK(src->schema().feature_names == std::vector<std::string>{"f1", "x[2]"});
      CHECK(src->schema().d_model == 3);
      ReportBatch b;
      REQUIRE(src->fill(0, 2, b));
      CHECK(b.token_offset == std::vector<std::uint64_t>{0, 1, 4});
      for (std::size_t t = 0; t < 4; ++t) {
        CHECK(b.features[0][t] == f[t * 2 + 1]);
        CHECK(b.features[1][t] == x[t * 3 + 2]);
      }
      REQUIRE(src->fill(1, 2, b));
      CHECK(b.first_report == 2);
      CHECK(b.token_offset == std::vector<std::uint64_t>{0, 2});
      CHECK(std::vector<float>(b.embeddings.begin(), b.embeddings.end()) == std::vector<float>(x.begin() + 12, x.end()));
      CHECK_FALSE(src->fill(2, 2, b));

      // Without a features tensor the file exposes no named column, but x[i] works.
      auto bare = open_tensor(reg, path, {{"x", "emb"}, {"feature_tensor", ""}, {"features", "x[0]"}});
      CHECK(bare->schema().feature_names == std::vector<std::string>{"x[0]"});
      auto none = open_tensor(reg, path, {{"x", "emb"}, {"feature_tensor", "nope"}});
      CHECK(none->schema().feature_names.empty());
    }
  }
}

TEST_CASE("tensor: report ids from __metadata__, --report selection keeps file order", "[tensor]") {
  TempDir tmp;
  auto reg = builtins();
  Uniform u;
  const auto path = tmp.file("ids.safetensors");
  auto meta = kSeedMeta;
  meta["report_ids"] = "r0,r1,r2,r3,r4";
  testutil::write_file(path, safetensors({{"x", "F32", {5, 3, 4}, bytes_of(u.x)}, {"features", "F32", {15, 3}, bytes_of(u.f)}}, meta));
  auto src = open_tensor(reg, path, {{"report", "r3,r1,r3"}});
  CHECK(src->total_reports() == 2);
  ReportBatch b;
  REQUIRE(src->fill(0, 8, b));
  CHECK(b.report_ids == std::vector<std::string>{"r1", "r3"});
  for (std::size_t k = 0; k < 12; ++k) CHECK(b.embeddings[k] == u.x[1 * 12 + k]);
  for (std::size_t k = 0; k < 12; ++k) CHECK(b.embeddings[12 + k] == u.x[3 * 12 + k]);
  CHECK(b.features[0][3] == u.f[(3 * 3) * 3 + 0]);

  // Without ids, reports are #<index> and a selection names them so.
  const auto plain = tmp.file("plain.safetensors");
  testutil::write_file(plain, u.file());
  auto sel = open_tensor(reg, plain, {{"report", "#4"}});
  REQUIRE(sel->fill(0, 8, b));
  CHECK(b.report_ids == std::vector<std::string>{"#4"});
  CHECK(contains(error_of(reg, path, {{"report", "r9"}}), "report 'r9' not found"));
}

TEST_CASE("tensor: chunks filled from several threads equal the sequential stream", "[tensor]") {
  TempDir tmp;
  auto reg = builtins();
  const std::size_t B = 301, n = 5, d = 7;
  const auto x = iota_f(B * n * d, 0.125f);
  const auto path = tmp.file("big.safetensors");
  testutil::write_file(path, safetensors({{"x", "F32", {B, n, d}, bytes_of(x)}}));
  auto src = open_tensor(reg, path, {{"features", "x[6]"}});
  std::vector<float> seq;
  {
    auto s2 = open_tensor(reg, path, {{"features", "x[6]"}});
    ReportBatch b;
    while (s2->next(b, 13)) seq.insert(seq.end(), b.embeddings.begin(), b.embeddings.end());
  }
  CHECK(seq == x);
  const std::size_t chunk = 10, chunks = (B + chunk - 1) / chunk;
  std::vector<ReportBatch> batches(chunks);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < 4; ++w)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < chunks;) src->fill(i, chunk, batches[i]);
    });
  for (auto& t : pool) t.join();
  std::vector<float> par;
  for (const auto& b : batches) par.insert(par.end(), b.embeddings.begin(), b.embeddings.end());
  CHECK(par == x);
  CHECK(batches.back().n_reports() == B % chunk);
}

TEST_CASE("tensor: bad files and parameters name the file and the tensor", "[tensor]") {
  TempDir tmp;
  auto reg = builtins();
  Uniform u;
  auto write = [&](const std::string& name, const std::string& bytes) {
    const auto p = tmp.file(name);
    testutil::write_file(p, bytes);
    return p;
  };
  const auto xb = bytes_of(u.x), fb = bytes_of(u.f);
  struct Case {
    std::string file, bytes;
    PluginParams params;
    std::vector<std::string> expect;
  };
  std::vector<float> nan_x = u.x;
  nan_x[2 * 12 + 5] = std::nanf("");
  std::vector<float> inf_f = u.f;  // [15 tokens][3 columns]: token row 10 = report 3, token 1
  inf_f[10 * 3 + 2] = std::numeric_limits<float>::infinity();
  std::vector<double> ninf_f(u.f.begin(), u.f.end());
  ninf_f[4 * 3 + 0] = -std::numeric_limits<double>::infinity();
  const std::map<std::string, std::string> named{{"features", "decision_axis,evidence_axis,condition_axis"}};
  const std::vector<Case> cases = {
      {"nox.safetensors", safetensors({{"y", "F32", {5, 3, 4}, xb}}), {}, {"nox.safetensors", "tensor 'x'", "missing"}},
      {"int.safetensors", safetensors({{"x", "I32", {5, 3, 4}, xb}}), {}, {"tensor 'x'", "dtype I32"}},
      {"rank.safetensors", safetensors({{"x", "F32", {60}, xb}}), {}, {"tensor 'x'", "[60]", "[B, n, d_model]"}},
      {"nooff.safetensors", safetensors({{"x", "F32", {15, 4}, xb}}), {}, {"tensor 'offsets'", "missing", "[B+1]"}},
      {"offend.safetensors", safetensors({{"offsets", "I64", {3}, bytes_of(std::vector<std::int64_t>{0, 5, 14})}, {"x", "F32", {15, 4}, xb}}),
       {}, {"tensor 'offsets'", "14", "15 token rows"}},
      {"offempty.safetensors", safetensors({{"offsets", "I64", {3}, bytes_of(std::vector<std::int64_t>{0, 0, 15})}, {"x", "F32", {15, 4}, xb}}),
       {}, {"tensor 'offsets'", "report 0 has no tokens"}},
      {"offneg.safetensors", safetensors({{"offsets", "I64", {2}, bytes_of(std::vector<std::int64_t>{-1, 15})}, {"x", "F32", {15, 4}, xb}}),
       {}, {"tensor 'offsets'", "negative"}},
      {"offf.safetensors", safetensors({{"offsets", "F32", {2}, bytes_of(std::vector<float>{0, 15})}, {"x", "F32", {15, 4}, xb}}),
       {}, {"tensor 'offsets'", "integer"}},
      {"offmismatch.safetensors", safetensors({{"offsets", "I64", {2}, bytes_of(std::vector<std::int64_t>{0, 15})}, {"x", "F32", {5, 3, 4}, xb}}),
       {}, {"tensor 'offsets'", "does not match"}},
      {"fshape.safetensors", safetensors({{"features", "F32", {14, 3}, fb.substr(0, 14 * 12)}, {"x", "F32", {5, 3, 4}, xb}}),
       {}, {"tensor 'features'", "[14, 3]", "[T, F]"}},
      {"fmeta.safetensors", safetensors({{"features", "F32", {15, 3}, fb}, {"x", "F32", {5, 3, 4}, xb}}, {{"features", "a,b"}}),
       {}, {"tensor 'features'", "names 2 columns"}},
      {"ids.safetensors", safetensors({{"x", "F32", {5, 3, 4}, xb}}, {{"report_ids", "a,b"}}), {}, {"ids.safetensors", "report_ids", "2 ids for 5"}},
      {"col.safetensors", safetensors({{"x", "F32", {5, 3, 4}, xb}}), {{"features", "decision_axis"}},
       {"col.safetensors", "'decision_axis'", "--axes", "x[0]..x[3]", "no 'features' tensor"}},
      {"colx.safetensors", safetensors({{"x", "F32", {5, 3, 4}, xb}}), {{"features", "x[4]"}}, {"'x[4]'", "x[0]..x[3]"}},
      {"nan.safetensors", safetensors({{"x", "F32", {5, 3, 4}, bytes_of(nan_x)}}), {},
       {"nan.safetensors", "tensor 'x'", "row 7", "report #2", "token 1", "component 1", "NaN"}},
      {"inff.safetensors", safetensors({{"features", "F32", {15, 3}, bytes_of(inf_f)}, {"x", "F32", {5, 3, 4}, xb}}, named), {},
       {"inff.safetensors", "tensor 'features'", "row 10", "report #3", "token 1", "column 'condition_axis'", ": inf"}},
      {"ninff.safetensors", safetensors({{"features", "F64", {15, 3}, bytes_of(ninf_f)}, {"x", "F32", {5, 3, 4}, xb}}, named), {},
       {"tensor 'features'", "row 4", "report #1", "token 1", "column 'decision_axis'", "-inf"}},
      {"trunc.safetensors", safetensors({{"x", "F32", {5, 3, 4}, xb}}).substr(0, 100), {}, {"trunc.safetensors"}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.file) {
      const auto msg = error_of(reg, write(c.file, c.bytes), c.params);
      INFO(msg);
      for (const auto& e : c.expect) CHECK(contains(msg, e));
    }
  }
  const auto missing = error_of(reg, tmp.file("absent.safetensors"));
  CHECK(contains(missing, "absent.safetensors"));
}

TEST_CASE("tensor: the CLI runs a safetensors batch, without features the seed axes are refused with a hint", "[tensor][cli]") {
  TempDir tmp;
  Uniform u;
  const auto path = tmp.file("x.safetensors");
  testutil::write_file(path, u.file());
  const std::string p = " -p tensor.path=" + testutil::shell_quote(path);
  auto r = testutil::run_cli("run --scenario tensor" + p + " --weighting uniform --format jsonl --threads 2");
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::size_t lines = 0;
  for (char ch : r.out) lines += ch == '\n';
  CHECK(lines == 5);
  CHECK(contains(r.out, "\"#4\""));

  const auto bare = tmp.file("bare.safetensors");
  testutil::write_file(bare, safetensors({{"x", "F32", {5, 3, 4}, bytes_of(u.x)}}));
  r = testutil::run_cli("run --scenario tensor -p tensor.path=" + testutil::shell_quote(bare) + " --weighting uniform --format jsonl");
  CHECK(r.status == 1);
  CHECK(contains(r.err, "bare.safetensors"));
  CHECK(contains(r.err, "--axes"));
  r = testutil::run_cli("run --scenario tensor -p tensor.path=" + testutil::shell_quote(bare) +
                        " --axes 'a=x[0];b=x[1]+x[2]' --weighting uniform --format jsonl");
  INFO(r.err);
  CHECK(r.status == 0);
}

TEST_CASE("tensor: a file truncated after it was opened is an error naming the file, not SIGBUS", "[tensor]") {
  // Was: the chunk read the memory-mapped file past its new end: SIGBUS, exit 135, no message.
  TempDir tmp;
  auto reg = builtins();
  Uniform u;
  const auto path = tmp.file("shrinking.safetensors");
  testutil::write_file(path, u.file());
  auto src = open_tensor(reg, path);
  ReportBatch b;
  REQUIRE(src->fill(0, 2, b));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 200);  // x's last reports and features gone
  const std::string what = [&] {
    try {
      for (std::uint64_t i = 0; src->fill(i, 2, b); ++i) {
      }
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  CHECK(contains(what, path));
  CHECK(contains(what, "truncated during the run"));
}
