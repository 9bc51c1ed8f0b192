// support/json_input.hpp and support/metric_check.hpp: JSON from outside is refused past 256
// levels before nlohmann builds anything (300 000 levels crashed), parse errors read as one line
// with line and column (no "[json.exception...]"), documents we write hold finite numbers only,
// and a metric row's non-finite value is named as a reader of the rows would look for it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "support/json_input.hpp"
#include "support/metric_check.hpp"

using headsep::JsonProblem;
using headsep::kMaxJsonDepth;

namespace {

std::string nested(std::size_t levels, const char* open = "[", const char* close = "]", const char* inner = "1") {
  std::string s;
  for (std::size_t i = 0; i < levels; ++i) s += open;
  s += inner;
  for (std::size_t i = 0; i < levels; ++i) s += close;
  return s;
}

std::string error_of(const std::string& text, const std::string& where = "f.json") {
  try {
    (void)headsep::parse_json(text, where);
  } catch (const headsep::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("JSON nesting: up to 256 levels parse, deeper is refused at the bracket past the limit", "[support][json]") {
  CHECK(kMaxJsonDepth == 256);
  CHECK_FALSE(headsep::json_too_deep(nested(kMaxJsonDepth)));
  CHECK(headsep::parse_json(nested(kMaxJsonDepth), "f.json").is_array());
  const auto p = headsep::json_too_deep(nested(kMaxJsonDepth + 1));
  REQUIRE(p);
  CHECK(p->too_deep);
  CHECK(p->line == 1);
  CHECK(p->column == kMaxJsonDepth + 1);
  // Objects count as arrays do; the place is the line and column of the opening bracket.
  const std::string obj = "{\n  \"a\": " + nested(300, "{\"k\":", "}", "0") + "\n}";
  const auto q = headsep::json_too_deep(obj);
  REQUIRE(q);
  CHECK(q->line == 2);
  CHECK(q->column == 8 + 5 * 255);
  CHECK(error_of(obj) == "f.json:2:1283: JSON nested deeper than 256 levels of arrays and objects (the limit for JSON "
                         "input, docs/LIMITS.md)");
  // Brackets inside strings (escaped quotes included) are text, not nesting.
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  CHECK_FALSE(headsep::json_too_deep(in_string));
  CHECK(headsep::parse_json(in_string, "f.json")[0].get<std::string>().size() == 2001);
}

TEST_CASE("JSON nested 300 000 deep is refused, not a stack overflow, and a syntax error before the depth wins",
          "[support][json]") {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    const std::string deep = nested(300000, open, close, "null");
    JsonProblem p;
    CHECK_FALSE(headsep::try_parse_json(deep, p));
    CHECK(p.too_deep);
    CHECK_FALSE(headsep::try_parse_json<nlohmann::ordered_json>(deep, p));
    CHECK_THAT(error_of(deep, "t.json"), Catch::StartsWith("t.json:1:") && Catch::Contains("deeper than 256 levels"));
    // Unclosed: the same refusal (the parser never gets there).
    CHECK_THAT(error_of(deep.substr(0, deep.size() / 2)), Catch::Contains("deeper than 256 levels"));
  }
  // [1 2 [[[...: the parser stops at '2', before the nesting: that is what is reported.
  CHECK(error_of("[1 2 " + nested(1000)) == "f.json:1:4: not valid JSON (unexpected number literal; expected ']')");
}

TEST_CASE("JSON parse errors: one line, the line and column of the fault, no exception names", "[support][json]") {
  CHECK(error_of("{\"a\": 1,\n \"b\": tru x}") == "f.json:2:10: not valid JSON (invalid literal; last read: '\"b\": tru ')");
  CHECK(error_of("") == "f.json:1:1: not valid JSON (unexpected end of input; expected '[', '{', or a literal)");
  CHECK(error_of("{} x") == "f.json:1:4: not valid JSON (invalid literal; last read: '{} x'; expected end of input)");
  // Invalid UTF-8 inside a string and control characters: escaped in the message, still one line.
  const std::string bad = error_of("[\"a\xff\"]");
  CHECK_THAT(bad, Catch::StartsWith("f.json:1:4: not valid JSON (invalid string: ill-formed UTF-8 byte"));
  CHECK(bad.find('\xff') == std::string::npos);
  const std::string ctl = error_of("[\"a\x01\"]");
  CHECK_THAT(ctl, Catch::Contains("control character"));
  CHECK(ctl.find('\x01') == std::string::npos);
  for (const std::string& m : {bad, ctl, error_of("[1,,2]"), error_of("{\"a\" 1}")}) {
    CHECK(m.find("json.exception") == std::string::npos);
    CHECK(m.find("parse error at") == std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
  // A number past double's range has no position from the parser: the number is quoted instead.
  CHECK(error_of("[1e999]") == "f.json: not valid JSON (number overflow parsing '1e999')");
  // One line of JSON lines: the column, the caller names file and line.
  JsonProblem p;
  CHECK_FALSE(headsep::try_parse_json("{\"text\": nope}", p));
  CHECK(p.in_line() == "column 11: not valid JSON (invalid literal; last read: '\"text\": no')");
}

TEST_CASE("check_finite_json: a document with NaN or Inf is refused by path before it is written", "[support][json]") {
  nlohmann::ordered_json j;
  j["scenarios"] = nlohmann::ordered_json::array();
  j["scenarios"].push_back({{"name", "a"}, {"metrics", {{"head_separation", {{"mean", 1.5}, {"std", 0.25}}}}}});
  CHECK_NOTHROW(headsep::check_finite_json(j, "summary", "why"));
  j["scenarios"].push_back({{"name", "b"}, {"metrics", {{"head_separation", {{"mean", 2.0}, {"std", INFINITY}}}}}});
  j["scenarios"][0]["metrics"]["js"] = NAN;  // the first in document order is named
  try {
    headsep::check_finite_json(j, "summary", "too large");
    FAIL("not refused");
  } catch (const headsep::Error& e) {
    CHECK(std::string(e.what()) == "summary: scenarios[0].metrics.js is not finite (too large)");
  }
}

TEST_CASE("nonfinite_metric names the first non-finite value of a row as the rows name it", "[support][json]") {
  headsep::MetricBlock m;
  m.head_stat_count = headsep::kHeadStats, m.pair_stat_count = headsep::kPairStats;
  m.resize(3, 2, 2);  // 3 heads, 2 axes, 2 reports
  CHECK(headsep::nonfinite_metric(m, 0).empty());
  CHECK_FALSE(headsep::any_nonfinite_metric(m));
  const double inf = std::numeric_limits<double>::infinity();
  m.pair_stats[(2 * headsep::kPairStats + headsep::kOutputCosine) * 2 + 1] = std::nan("");  // pair (2,3), report 1
  CHECK(headsep::any_nonfinite_metric(m));
  CHECK(headsep::nonfinite_metric(m, 0).empty());
  CHECK(headsep::nonfinite_metric(m, 1) == "pair head2-head3's output_cosine");
  m.head_stats[(1 * headsep::kHeadStats + headsep::kEntropy) * 2 + 1] = inf;
  CHECK(headsep::nonfinite_metric(m, 1) == "head1's entropy");
  m.separation[1] = inf;
  CHECK(headsep::nonfinite_metric(m, 1) == "head_separation");
  m.pairwise[1 * 2 + 1] = inf;  // pair (1,3)
  CHECK(headsep::nonfinite_metric(m, 1) == "the context distance of pair head1-head3");
  m.difference[((2 - 1) * 2 + 1) * 2 + 1] = -inf;  // head2, axis 2
  CHECK(headsep::nonfinite_metric(m, 1, {"d", "ec"}) == "head2's difference from the single head on axis 'ec'");
  m.context[(0 * 2 + 0) * 2 + 1] = inf;
  CHECK(headsep::nonfinite_metric(m, 1) == "the single head's context on axis 1");
}
