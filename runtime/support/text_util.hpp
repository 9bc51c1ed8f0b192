// Private text helpers: Python-compatible number/str formatting, JSON and CSV escaping, UTF-8.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headsep {

std::vector<std::string_view> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);

/// Python's float repr (shortest round-trip; fixed notation for 1e-4 <= |x| < 1e16, else 'e+XX').
void append_py_float(std::string& out, double x);
/// Python's round(x, ndigits) for floats: correctly rounded decimal, then back to the nearest double.
double py_round(double x, int ndigits);
/// Python's repr of a str: quotes chosen as Python does, escapes for non-printable characters.
void append_py_str(std::string& out, std::string_view utf8);

/// Shortest round-trip double, valid JSON (finite values only).
void append_json_number(std::string& out, double x);
void append_json_string(std::string& out, std::string_view utf8);
/// RFC 4180 field: quoted when it holds a comma, quote, CR or LF.
void append_csv_field(std::string& out, std::string_view s);

/// Text from a plugin or a file made fit for one terminal line: control characters (C0, DEL, C1)
/// and bytes of invalid UTF-8 as \xNN, cut after `limit` bytes of input (at a character
/// boundary) with "... (N bytes)" saying how long it was.
std::string printable(std::string_view s, std::size_t limit = 2000);

/// A JSON parser's message for a user's eyes: nlohmann's "[json.exception.…] " prefix dropped,
/// printable() and cut short (a number past double's range is quoted whole in the message).
std::string json_error_text(const char* what);

/// Appends code point `c` (< 0x110000) as UTF-8.
void append_utf8(std::string& out, std::uint32_t c);

/// Byte offset of the first invalid UTF-8 sequence, or nullopt when valid.
std::optional<std::size_t> find_invalid_utf8(std::string_view s);

/// The one number grammar for user input: CSV feature and weight fields and `-p key=value` for
/// float parameters (docs/PLUGINS.md, "Parameter values"). Parses the whole text as a finite
/// double the way Python's float() does for plain decimal numbers:
///   [blanks] [+|-] (digits [. [digits]] | . digits) [(e|E) [+|-] digits] [blanks]
/// Underflow rounds to the nearest double (0 or subnormal, as Python); nullopt on anything
/// else: overflow, inf, nan, hex floats (0x1p3), digit separators (1_000, 1,5), empty text.
std::optional<double> parse_finite_double(std::string_view s);
/// A float parameter value in canonical form: parse_finite_double, then the shortest decimal
/// that reads back to the same double ("+2.50" -> "2.5", "1e-400" -> "0"). nullopt if invalid.
std::optional<std::string> canonical_double(std::string_view s);

}  // namespace headsep
