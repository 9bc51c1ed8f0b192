#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "test_util.hpp"
#include "support/text_util.hpp"

using namespace headsep;

namespace {
std::string py_float(double x) {
  std::string s;
  append_py_float(s, x);
  return s;
}
std::string py_str(std::string_view v) {
  std::string s;
  append_py_str(s, v);
  return s;
}
}  // namespace

TEST_CASE("Python float repr, as printed by the seed script", "[text]") {
  // Expected strings are CPython 3.11's repr().
  CHECK(py_float(0.1) == "0.1");
  CHECK(py_float(1.3) == "1.3");
  CHECK(py_float(-0.0) == "-0.0");
  CHECK(py_float(0.0) == "0.0");
  CHECK(py_float(100.0) == "100.0");
  CHECK(py_float(1234567.0) == "1234567.0");
  CHECK(py_float(1e16) == "1e+16");
  CHECK(py_float(1.5e16) == "1.5e+16");
  CHECK(py_float(123456789012345.6) == "123456789012345.6");
  CHECK(py_float(1e-4) == "0.0001");
  CHECK(py_float(0.00012345) == "0.00012345");
  CHECK(py_float(1e-5) == "1e-05");
  CHECK(py_float(-2.5) == "-2.5");
  CHECK(py_float(1e300) == "1e+300");
  CHECK(py_float(5e-324) == "5e-324");
  CHECK(py_float(0.1 + 0.2) == "0.30000000000000004");
}

TEST_CASE("Python round() to 3 digits rounds the exact binary value", "[text]") {
  CHECK(py_round(2.675, 2) == 2.67);  // 2.675 is 2.67499999... in binary
  CHECK(py_round(0.0005, 3) == 0.001);
  CHECK(py_round(0.0015, 3) == 0.002);
  CHECK(py_round(1.0005, 3) == 1.0);
  CHECK(py_round(0.1 + 0.2, 3) == 0.3);
  double neg = py_round(-0.0001, 3);
  CHECK(neg == 0.0);
  CHECK(std::signbit(neg));  // Python prints -0.0
  CHECK(py_round(1e300, 3) == 1e300);
}

TEST_CASE("Python str repr picks quotes and escapes like CPython", "[text]") {
  CHECK(py_str("a") == "'a'");
  CHECK(py_str("it's") == "\"it's\"");
  CHECK(py_str("say \"hi\"") == "'say \"hi\"'");
  CHECK(py_str("both ' \"") == "'both \\' \"'");
  CHECK(py_str("tab\there") == "'tab\\there'");
  CHECK(py_str("nl\n") == "'nl\\n'");
  CHECK(py_str(std::string("\x00\x7f", 2) + "\xc2\x80\xc2\xa0") == "'\\x00\\x7f\\x80\\xa0'");
  CHECK(py_str("\xe2\x80\x8b\xe2\x80\xa8\xef\xbb\xbf") == "'\\u200b\\u2028\\ufeff'");
  CHECK(py_str("\xf0\x9f\x98\x80") == "'\xf0\x9f\x98\x80'");
  CHECK(py_str("정지결정") == "'정지결정'");
  CHECK(py_str("back\\slash") == "'back\\\\slash'");
}

TEST_CASE("JSON numbers are shortest round-trip doubles", "[text]") {
  for (double x : {0.1, 1.0 / 3.0, -2.5e-300, 1e22, 123.0, 0.0, 5e-324}) {
    std::string s;
    append_json_number(s, x);
    CHECK(std::strtod(s.c_str(), nullptr) == x);
  }
  std::string s;
  append_json_number(s, 0.30000000000000004);
  CHECK(s == "0.30000000000000004");
  s.clear();
  append_json_string(s, "a\"b\\c\n\x01");
  CHECK(s == "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST_CASE("CSV fields are quoted only when needed", "[text]") {
  std::string s;
  append_csv_field(s, "plain");
  append_csv_field(s, "a,b");
  append_csv_field(s, "say \"x\"");
  append_csv_field(s, "two\nlines");
  CHECK(s == "plain\"a,b\"\"say \"\"x\"\"\"\"two\nlines\"");
}

TEST_CASE("UTF-8 validation finds the first bad byte", "[text]") {
  CHECK_FALSE(find_invalid_utf8("plain ascii, long enough for the fast path"));
  CHECK_FALSE(find_invalid_utf8("정지결정 and 😀"));
  CHECK(find_invalid_utf8("ab\xff") == 2u);
  CHECK(find_invalid_utf8("abcdefgh\xc3") == 8u);            // truncated sequence
  CHECK(find_invalid_utf8("\xc0\xaf") == 0u);                // overlong '/'
  CHECK(find_invalid_utf8("x\xed\xa0\x80") == 1u);           // UTF-16 surrogate
  CHECK(find_invalid_utf8("\xf4\x90\x80\x80") == 0u);        // above U+10FFFF
}

TEST_CASE("numbers parse like Python's float() for plain decimals", "[text]") {
  CHECK(parse_finite_double("1.5") == 1.5);
  CHECK(parse_finite_double(" 2 ") == 2.0);
  CHECK(parse_finite_double("+0.25") == 0.25);
  CHECK(parse_finite_double("-1e-3") == -1e-3);
  CHECK(parse_finite_double("1e-400") == 0.0);  // underflow -> 0, as in Python
  CHECK_FALSE(parse_finite_double(""));
  CHECK_FALSE(parse_finite_double("abc"));
  CHECK_FALSE(parse_finite_double("1.5x"));
  CHECK_FALSE(parse_finite_double("nan"));
  CHECK_FALSE(parse_finite_double("inf"));
  CHECK_FALSE(parse_finite_double("-infinity"));
  CHECK_FALSE(parse_finite_double("1e400"));
  CHECK_FALSE(parse_finite_double("+-1"));
}

TEST_CASE("one number grammar: every accepted and refused form", "[text]") {
  // Accepted: decimal, fixed or exponent, signs, surrounding blanks, no digits on one side of '.'.
  CHECK(parse_finite_double(".5") == 0.5);
  CHECK(parse_finite_double("5.") == 5.0);
  CHECK(parse_finite_double("\t-2E+2\r\n") == -200.0);
  CHECK(parse_finite_double("1e-320") == 1e-320);  // subnormal kept
  CHECK(parse_finite_double("-0") == 0.0);
  CHECK(parse_finite_double("1.7976931348623157e308") == 1.7976931348623157e308);
  // Refused: hex floats, inf/nan in any spelling, separators, lone signs or exponents, inner blanks.
  for (const char* bad : {"0x1p3", "0X10", "1p3", "Infinity", "+inf", "NaN", "-nan(1)", "1_000", "1,5", "1 000", "+", "-",
                          ".", "e5", "1e", "1e+", "--1", "-+1", "++1", "1..2", "1.2.3", "1.8e308", "\xef\xbc\x91"})
    CHECK_FALSE(parse_finite_double(bad));
  CHECK_FALSE(parse_finite_double(std::string_view("1\0", 2)));
}

TEST_CASE("float parameter values: the CSV grammar, then the shortest round-trip form", "[text][params]") {
  CHECK(canonical_double("+2.50") == "2.5");
  CHECK(canonical_double(" 3 ") == "3");
  CHECK(canonical_double("1e-400") == "0");
  CHECK(canonical_double("-0.0") == "-0");
  CHECK(canonical_double("0.1") == "0.1");
  CHECK(canonical_double("1E3") == "1000");
  CHECK(canonical_double("123456789012345678901234567890") == "1.2345678901234568e+29");
  for (const char* bad : {"0x1p1", "inf", "nan", "1e400", "", "3.0f", "1_0"}) CHECK_FALSE(canonical_double(bad));
}

TEST_CASE("plugin parameters (-p) accept the documented float forms and refuses the others as usage errors", "[text][params][cli]") {
  using namespace testutil;
  const std::string run = "run -s ops-reports -w axis-focus -p reports=50 -q --format jsonl -p sharpness=";
  const auto ref = run_cli(run + "3");
  REQUIRE(ref.status == 0);
  for (const char* same : {"+3", "3.0", "' 3e0 '", "300e-2", ".3e1"}) {
    INFO(same);
    const auto r = run_cli(run + same);
    CHECK(r.status == 0);
    CHECK(r.out == ref.out);
  }
  for (const char* bad : {"0x1.8p1", "inf", "nan", "1e999", "3,0", "1_0"}) {
    INFO(bad);
    const auto r = run_cli(run + bad);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("parameter 'sharpness' expects a finite number"));
  }
}
