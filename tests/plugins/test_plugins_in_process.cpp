// In-process plugins (PluginRegistry::add): a C++ generator and weighting defined here, with no
// library, go through the checks a .so gets — descriptor, names, parameters, every chunk, weights —
// and are refused naming their origin; a .so's own descriptor registered in-process gives the
// same summary as the file.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"
#include "headsep/run.hpp"
#include "headsep/summary.hpp"
#include "test_plugins.hpp"

using namespace headsep;
using namespace plugin_tests;

namespace {

// ---- the in-process test plugins ----------------------------------------------------------
// The context both get through *state: how often they were opened, and the state they make.
struct Context {
  int opens = 0;
  std::string mode;
  std::uint64_t reports = 0;
  std::vector<const char*> features{"decision_axis", "evidence_axis", "condition_axis"};
  headsep_schema schema{};
  const char* designs[1] = {"only"};
};

thread_local std::string g_error;
const char* last_error() { return g_error.c_str(); }

std::string param(const headsep_param* p, std::uint32_t n, const char* name) {
  for (std::uint32_t i = 0; i < n; ++i)
    if (std::string(p[i].name) == name) return p[i].value;
  return {};
}

headsep_status gen_open(const headsep_param* p, std::uint32_t n, void** state) {
  auto* ctx = static_cast<Context*>(*state);  // the registration's user pointer
  if (!ctx) {
    g_error = "no context in *state";
    return HEADSEP_ERROR;
  }
  ++ctx->opens;
  ctx->mode = param(p, n, "mode");
  ctx->reports = std::stoull(param(p, n, "reports"));
  if (ctx->mode == "open-fails") {
    g_error = "cannot open: asked to fail";
    return HEADSEP_ERROR;
  }
  return HEADSEP_OK;  // the state is the context itself
}

headsep_status gen_describe(void* state, headsep_schema* out) {
  auto* ctx = static_cast<Context*>(state);
  ctx->features[2] = ctx->mode == "dup-feature" ? "decision_axis" : "condition_axis";
  ctx->schema = headsep_schema{};
  ctx->schema.struct_size = sizeof(headsep_schema);
  ctx->schema.flags = HEADSEP_SCHEMA_RANDOM_ACCESS;
  ctx->schema.n_features = 3;
  ctx->schema.feature_names = ctx->features.data();
  ctx->schema.total_reports = ctx->reports;
  *out = ctx->schema;
  return HEADSEP_OK;
}

// Report r has 2 + r % 3 tokens; token t of report r: decision (r + t) % 5 / 2, evidence t / 3,
// condition 1 - t / 4. Random access: chunk i = reports [i * max, ...).
headsep_status gen_next(void* state, std::uint64_t index, std::uint64_t max, headsep_chunk_out* out) {
  const auto* ctx = static_cast<const Context*>(state);
  const std::uint64_t first = index * max;
  if (first >= ctx->reports) return HEADSEP_END;
  std::uint64_t n = std::min(max, ctx->reports - first);
  if (ctx->mode == "fail" && index == 1) {
    g_error = "boom in chunk 1";
    return HEADSEP_ERROR;
  }
  if (ctx->mode == "short" && n > 1) --n;
  std::uint64_t* off = out->token_offsets(out, n);
  if (!off) return HEADSEP_ERROR;
  off[0] = 0;
  for (std::uint64_t r = 0; r < n; ++r) off[r + 1] = off[r] + 2 + (first + r) % 3;
  const std::uint64_t tokens = off[n];
  for (std::uint32_t f = 0; f < 3; ++f) {
    if (ctx->mode == "no-feature" && f == 1) continue;
    const std::uint64_t len = ctx->mode == "wrong-size" && f == 2 ? tokens - 1 : tokens;
    double* x = out->feature(out, f, len);
    if (!x) return HEADSEP_ERROR;
    for (std::uint64_t r = 0; r < n; ++r)
      for (std::uint64_t t = off[r]; t < off[r + 1] && t < len; ++t) {
        const double k = double(t - off[r]);
        x[t] = f == 0 ? double((first + r + t - off[r]) % 5) / 2 : f == 1 ? k / 3 : 1 - k / 4;
      }
    if (ctx->mode == "nan" && f == 1 && first <= 2 && first + n > 2) x[off[2 - first] + 1] = std::nan("");
  }
  if (ctx->mode == "bad-id")
    for (std::uint64_t r = 0; r < n; ++r) out->report_id(out, r == 0 ? "\xff" "bad" : "ok", r == 0 ? 4 : 2);
  return HEADSEP_OK;
}

void gen_close(void* state) { static_cast<Context*>(state)->opens += 1000; }

headsep_status w_create(const headsep_param* p, std::uint32_t n, const headsep_schema* schema, void** state) {
  auto* ctx = static_cast<Context*>(*state);
  ++ctx->opens;
  ctx->mode = param(p, n, "mode");
  (void)schema;
  return HEADSEP_OK;
}

headsep_status w_describe(void* state, headsep_weighting_info* info) {
  auto* ctx = static_cast<Context*>(state);
  *info = headsep_weighting_info{};
  info->struct_size = sizeof(headsep_weighting_info);
  info->heads = 2;
  info->n_scenarios = 1;
  info->scenario_names = ctx->designs;
  return HEADSEP_OK;
}

// Baseline uniform, head 1 proportional to 1 + decision, head 2 to 1 + condition (per report).
headsep_status w_weights(const void* state, const headsep_batch_view* b, std::uint32_t, double* const* rows) {
  const auto* ctx = static_cast<const Context*>(state);
  if (ctx->mode == "fail") {
    g_error = "weights refused";
    return HEADSEP_ERROR;
  }
  for (std::uint64_t r = 0; r < b->n_reports; ++r) {
    const std::uint64_t a = b->token_offset[r], e = b->token_offset[r + 1];
    double s1 = 0, s2 = 0;
    for (auto t = a; t < e; ++t) s1 += 1 + b->features[0][t], s2 += 1 + b->features[2][t];
    for (auto t = a; t < e; ++t) {
      rows[0][t] = 1.0 / double(e - a);
      rows[1][t] = (1 + b->features[0][t]) / s1;
      rows[2][t] = (1 + b->features[2][t]) / s2;
    }
  }
  if (ctx->mode == "negative") rows[2][1] = -0.5;
  if (ctx->mode == "nan") rows[1][0] = std::numeric_limits<double>::quiet_NaN();
  return HEADSEP_OK;
}

void w_destroy(void* state) { static_cast<Context*>(state)->opens += 1000; }

constexpr headsep_param_spec kGenParams[] = {{"reports", HEADSEP_PARAM_INT, "10", "reports"},
                                             {"mode", HEADSEP_PARAM_STRING, "ok", "the mistake to make"}};
constexpr headsep_param_spec kWParams[] = {{"mode", HEADSEP_PARAM_STRING, "ok", "the mistake to make"}};

headsep_plugin_descriptor base(std::uint32_t kind, const char* name) {
  headsep_plugin_descriptor d{};
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = kind;
  d.name = name;
  d.version = "1.0.0";
  d.description = "in-process test plugin";
  d.last_error = &last_error;
  return d;
}

headsep_plugin_descriptor gen_descriptor(const char* name = "inproc-gen") {
  auto d = base(HEADSEP_KIND_SCENARIO, name);
  d.n_params = 2;
  d.params = kGenParams;
  d.open = &gen_open;
  d.describe = &gen_describe;
  d.next_chunk = &gen_next;
  d.close = &gen_close;
  return d;
}

headsep_plugin_descriptor w_descriptor() {
  auto d = base(HEADSEP_KIND_WEIGHTING, "inproc-w");
  d.n_params = 1;
  d.params = kWParams;
  d.create = &w_create;
  d.describe_weighting = &w_describe;
  d.weights = &w_weights;
  d.destroy = &w_destroy;
  return d;
}

const std::string kGenOrigin = "C++ test generator (test_plugins_in_process.cpp)";
const std::string kWOrigin = "C++ test weighting (test_plugins_in_process.cpp)";

// A registry holding both test plugins, each with its own context.
struct Fixture {
  std::shared_ptr<Context> gen = std::make_shared<Context>(), w = std::make_shared<Context>();
  PluginRegistry reg;
  Fixture() {
    reg.add({gen_descriptor(), gen, gen.get(), kGenOrigin});
    reg.add({w_descriptor(), w, w.get(), kWOrigin});
  }
};

// The summary of a whole run (one thread, so the first bad chunk is the one reported).
std::string summary_of(const PluginRegistry& reg, const std::string& s, const PluginParams& sp, const std::string& w,
                       const PluginParams& wp, std::size_t chunk = 4) {
  auto source = open_scenario_plugin(reg, s, sp);
  auto weighting = open_weighting_plugin(reg, w, wp, source->schema());
  auto axes = AxisMap::bind(parse_axes(kSeedAxes), source->schema().feature_names);
  RunInfo info{axes.names(), weighting->heads()};
  Summary summary(info);
  RunOptions opt;
  opt.threads = 1;
  opt.chunk_reports = chunk;
  run(*source, *weighting, axes, opt, {&summary});
  return summary.json();
}

// The run must fail with a PluginError naming `who` and containing every part of `expect`.
void expect_refused(const std::function<void()>& f, const std::string& who, const std::vector<std::string>& expect) {
  try {
    f();
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(contains(m, who));
    for (const auto& part : expect) CHECK(contains(m, part));
  }
}

}  // namespace

TEST_CASE("in-process plugins: registered, opened with their context, parameters like a .so's", "[plugins][inproc]") {
  Fixture fx;
  const auto* info = fx.reg.find("inproc-gen");
  REQUIRE(info);
  CHECK(info->origin == kGenOrigin);
  CHECK(info->file.empty());
  CHECK(info->label() == "scenario plugin 'inproc-gen' (" + kGenOrigin + ")");
  REQUIRE(info->params.size() == 2);
  CHECK(info->params[0].default_value == "10");
  {
    auto src = open_scenario_plugin(fx.reg, "inproc-gen", {{"reports", "+7"}});
    CHECK(fx.gen->opens == 1);
    CHECK(fx.gen->reports == 7);  // the canonical value, as a .so gets it
    CHECK(src->total_reports() == 7);
    CHECK(src->label() == info->label());
  }
  CHECK(fx.gen->opens == 1001);  // closed with the source
  // -p items are split between the two as for files.
  auto [sp, wp] = split_params({"reports=3", "inproc-w.mode=ok"}, *info, *fx.reg.find("inproc-w"));
  CHECK(sp == PluginParams{{"reports", "3"}});
  CHECK(wp == PluginParams{{"mode", "ok"}});
  const std::string a = summary_of(fx.reg, "inproc-gen", sp, "inproc-w", wp);
  CHECK(contains(a, "\"count\": 3"));
  // The result does not depend on the chunk size (random access checked like a file's).
  CHECK(summary_of(fx.reg, "inproc-gen", {{"reports", "3"}}, "inproc-w", {}, 1) == a);
  // Bad values are refused by the host before open.
  CHECK_THROWS_WITH(open_scenario_plugin(fx.reg, "inproc-gen", {{"reports", "many"}}),
                    Catch::Contains("reports") && Catch::Contains("int"));
  CHECK_THROWS_WITH(open_scenario_plugin(fx.reg, "inproc-gen", {{"colour", "red"}}), Catch::Contains("no parameter 'colour'; valid parameters: reports, mode"));
}

TEST_CASE("in-process plugins: the descriptor checks a .so gets, naming the origin", "[plugins][inproc]") {
  auto ctx = std::make_shared<Context>();
  PluginRegistry reg;
  auto add = [&](headsep_plugin_descriptor d) { return reg.add({d, ctx, ctx.get(), kGenOrigin}); };
  auto d = gen_descriptor("bad.name");
  CHECK_THROWS_WITH(add(d), Catch::StartsWith(kGenOrigin + ": invalid plugin name") && Catch::Contains("'.'"));
  d = gen_descriptor("scenario");
  CHECK_THROWS_WITH(add(d), Catch::Contains("reserved"));
  d = gen_descriptor();
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR + 1;
  CHECK_THROWS_WITH(add(d), Catch::StartsWith(kGenOrigin + ": built for plugin ABI"));
  d = gen_descriptor();
  d.next_chunk = nullptr;
  CHECK_THROWS_WITH(add(d), Catch::Contains("lacks required descriptor field 'next_chunk'"));
  static constexpr headsep_param_spec bad_default[] = {{"reports", HEADSEP_PARAM_INT, "ten", nullptr}};
  d = gen_descriptor();
  d.n_params = 1;
  d.params = bad_default;
  CHECK_THROWS_WITH(add(d), Catch::Contains("reports") && Catch::Contains(kGenOrigin));
  CHECK_THROWS_WITH(reg.add({gen_descriptor(), ctx, ctx.get(), ""}), Catch::Contains("origin"));
  CHECK(reg.plugins().empty());
  // A name a plugin file holds is refused naming both; a newer in-process definition replaces the older.
  auto files = builtins();
  auto ops = gen_descriptor("ops-reports");
  CHECK_THROWS_WITH(files.add({ops, ctx, ctx.get(), kGenOrigin}),
                    Catch::Contains("two plugins are named 'ops-reports'") && Catch::Contains("ops-reports.so") &&
                        Catch::Contains(kGenOrigin));
  add(gen_descriptor());
  auto other = std::make_shared<Context>();
  reg.add({gen_descriptor(), other, other.get(), "second definition"});
  REQUIRE(reg.plugins().size() == 1);
  CHECK(reg.plugins()[0].origin == "second definition");
  open_scenario_plugin(reg, "inproc-gen", {});
  CHECK(other->opens == 1001);
  CHECK(ctx->opens == 0);
  // The registry keeps the owner alive; an opened plugin keeps it alive past the registry.
  std::weak_ptr<Context> weak = other;
  other.reset();
  CHECK_FALSE(weak.expired());
  auto src = open_scenario_plugin(reg, "inproc-gen", {});
  reg = PluginRegistry();
  CHECK_FALSE(weak.expired());
  src.reset();
  CHECK(weak.expired());
}

TEST_CASE("in-process plugins: chunk and weight mistakes refused by the host's checks, by name", "[plugins][inproc]") {
  Fixture fx;
  const std::string gen = "scenario plugin 'inproc-gen' (" + kGenOrigin + ")";
  const std::string w = "weighting plugin 'inproc-w' (" + kWOrigin + ")";
  auto with = [&](const std::string& gmode, const std::string& wmode) {
    return [&fx, gmode, wmode] { summary_of(fx.reg, "inproc-gen", {{"mode", gmode}}, "inproc-w", {{"mode", wmode}}); };
  };
  expect_refused(with("open-fails", "ok"), gen, {"open failed: cannot open: asked to fail"});
  expect_refused(with("dup-feature", "ok"), gen, {"feature 'decision_axis' is listed twice"});
  expect_refused(with("fail", "ok"), gen, {"chunk 1: next_chunk failed: boom in chunk 1"});
  expect_refused(with("short", "ok"), gen, {"chunk 0 holds 3 reports instead of 4"});
  expect_refused(with("no-feature", "ok"), gen, {"chunk 0 is malformed: feature 'evidence_axis' was not written"});
  expect_refused(with("wrong-size", "ok"), gen, {"feature 'condition_axis' has"});
  expect_refused(with("nan", "ok"), gen, {"feature 'evidence_axis' of token 2 is nan"});
  expect_refused(with("bad-id", "ok"), gen, {"not valid UTF-8"});
  expect_refused(with("ok", "fail"), w, {"weights failed", "weights refused"});
  expect_refused(with("ok", "negative"), w, {"scenario 'only': head2 weight of token 2 is -0.5"});
  expect_refused(with("ok", "nan"), w, {"head1 weight of token 1 is nan"});
}

TEST_CASE("in-process plugins: a .so's own descriptor registered in-process gives the file's summary", "[plugins][inproc]") {
  auto files = builtins();
  const std::string want =
      summary_of(files, "ops-reports", {{"reports", "500"}}, "axis-focus", {}, 64);
  PluginRegistry reg;
  for (const char* name : {"ops-reports", "axis-focus"}) {
    void* handle = dlopen(files.find(name)->file.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle);
    std::shared_ptr<void> lib(handle, [](void* h) { dlclose(h); });
    auto entry = reinterpret_cast<headsep_plugin_entry_fn>(dlsym(handle, HEADSEP_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(entry);
    reg.add({*entry(), lib, nullptr, std::string("in-process copy of ") + name});
  }
  CHECK(summary_of(reg, "ops-reports", {{"reports", "500"}}, "axis-focus", {}, 64) == want);
  CHECK(summary_of(reg, "ops-reports", {{"reports", "500"}}, "axis-focus", {}, 7) == want);
}
