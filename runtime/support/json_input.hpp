// Reading JSON that came from outside (config.json, tokenizer.json, safetensors headers, index
// files, JSON lines, summaries): the nesting depth bounded before nlohmann builds anything, and
// a parse error as one short line with its line and column instead of nlohmann's exception text.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headsep {

/// Deepest nesting of arrays and objects any JSON input may have (docs/LIMITS.md). nlohmann's
/// parser is iterative, but copying, comparing and dumping a value recurse once per level: a
/// file nested 300 000 deep overflowed the stack. serde_json, which Hugging Face's tokenizers
/// and safetensors use, stops at 128; no file headsep reads needs more than a few levels.
inline constexpr std::size_t kMaxJsonDepth = 256;

/// Where and why a JSON text was refused: line and column 1-based (bytes; 0 when unknown).
struct JsonProblem {
  std::size_t line = 0, column = 0;
  bool too_deep = false;  ///< past kMaxJsonDepth; else a syntax error
  std::string reason;     ///< the parser's, printable, e.g. "invalid literal; last read: 'tru x'"
  /// "not valid JSON (REASON)" or "JSON nested deeper than 256 levels ...".
  std::string message() const;
  /// "WHERE:LINE:COLUMN: message()" (a file), or "WHERE: message()" when the place is unknown.
  std::string located(const std::string& where) const;
  /// "column C: message()": within one line of JSON lines, whose line the caller names.
  std::string in_line() const;
};

/// The first opening bracket past kMaxJsonDepth levels, or nullopt. Strings (and their escapes)
/// are skipped as JSON reads them, so up to the first syntax error the depth is the parser's.
std::optional<JsonProblem> json_too_deep(std::string_view text);

/// nlohmann's exception for `text` as a JsonProblem: the position from its byte count, the
/// reason without the "[json.exception.parse_error.101] parse error at ..." wrapping.
JsonProblem json_problem(const nlohmann::json::exception& e, std::string_view text);

/// `text` parsed after the depth check; nullopt with `problem` set when refused.
template <class Json = nlohmann::json>
std::optional<Json> try_parse_json(std::string_view text, JsonProblem& problem,
                                   typename Json::parser_callback_t cb = nullptr) {
  if (auto deep = json_too_deep(text)) {
    problem = std::move(*deep);
    return std::nullopt;
  }
  try {
    return Json::parse(text.begin(), text.end(), std::move(cb));
  } catch (const nlohmann::json::exception& e) {
    problem = json_problem(e, text);
    return std::nullopt;
  }
}

/// Throws Error(problem.located(where)).
[[noreturn]] void throw_json_problem(const std::string& where, const JsonProblem& problem);

/// `text` parsed (try_parse_json), or Error naming `where` (a file name).
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& where, typename Json::parser_callback_t cb = nullptr) {
  JsonProblem p;
  if (auto j = try_parse_json<Json>(text, p, std::move(cb))) return std::move(*j);
  throw_json_problem(where, p);
}

/// Every number of a JSON document about to be written is finite (nlohmann writes NaN and Inf as
/// null, which a reader takes for "no value"): else Error("WHAT: PATH is not finite (WHY)"),
/// PATH as scenarios[0].metrics.head_separation.std.
void check_finite_json(const nlohmann::ordered_json& j, const std::string& what, const std::string& why);

/// A JSON value for a message: dumped, cut to `limit` bytes, control characters escaped.
std::string json_brief(const nlohmann::json& v, std::size_t limit = 60);

}  // namespace headsep
