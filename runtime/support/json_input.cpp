// JSON from outside: the depth pre-scan, nlohmann's errors as short lines (json_input.hpp).
#include "support/json_input.hpp"

#include <cmath>
#include <utility>
#include <vector>

#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep {

std::string JsonProblem::message() const {
  if (too_deep)
    return "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
           " levels of arrays and objects (the limit for JSON input, docs/LIMITS.md)";
  return "not valid JSON (" + reason + ")";
}

std::string JsonProblem::located(const std::string& where) const {
  if (!column) return where + ": " + message();  // a number past double's range: no position
  return where + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message();
}

std::string JsonProblem::in_line() const {
  return column ? "column " + std::to_string(column) + ": " + message() : message();
}

namespace {

JsonProblem at_byte(std::string_view text, std::size_t byte, JsonProblem p) {
  p.line = p.column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) text[i] == '\n' ? (++p.line, p.column = 1) : ++p.column;
  return p;
}

// The syntax error of text[0, end) that comes before `end`, if any: the parser stops there,
// so that is what to report even when deeper nesting follows.
std::optional<JsonProblem> error_before(std::string_view text, std::size_t end) {
  try {
    const auto prefix = nlohmann::json::parse(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end));
    (void)prefix;  // (never complete: `end` is inside an open bracket)
  } catch (const nlohmann::json::parse_error& e) {
    if (e.byte < end) return json_problem(e, text);
  } catch (const nlohmann::json::exception& e) {
    return json_problem(e, text);
  }
  return std::nullopt;
}

}  // namespace

std::optional<JsonProblem> json_too_deep(std::string_view s) {
  std::size_t depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        if (auto earlier = error_before(s, i)) return earlier;
        JsonProblem p;
        p.too_deep = true;
        return at_byte(s, i, std::move(p));
      }
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return std::nullopt;
}

JsonProblem json_problem(const nlohmann::json::exception& e, std::string_view text) {
  std::string_view w(e.what());
  if (w.substr(0, 16) == "[json.exception.")  // "[json.exception.parse_error.101] "
    if (const auto p = w.find("] "); p != std::string_view::npos) w.remove_prefix(p + 2);
  if (w.substr(0, 15) == "parse error at ")  // "parse error at line 1, column 29: " (ours is recomputed)
    if (const auto p = w.find(": "); p != std::string_view::npos) w.remove_prefix(p + 2);
  if (w.substr(0, 26) == "syntax error while parsing")  // "syntax error while parsing value - "
    if (const auto p = w.find(" - "); p != std::string_view::npos) w.remove_prefix(p + 3);
  JsonProblem p;
  p.reason = printable(w, 160);
  if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e); pe && pe->byte > 0)
    return at_byte(text, pe->byte - 1, std::move(p));  // byte: characters read, the offending one included
  return p;
}

void throw_json_problem(const std::string& where, const JsonProblem& problem) {
  throw Error(problem.located(where));
}

void check_finite_json(const nlohmann::ordered_json& j, const std::string& what, const std::string& why) {
  std::vector<std::pair<const nlohmann::ordered_json*, std::string>> todo{{&j, std::string()}};
  while (!todo.empty()) {  // (a document we built: no depth bound needed, but no recursion either)
    auto [v, path] = std::move(todo.back());
    todo.pop_back();
    if (v->is_number_float() && !std::isfinite(v->get<double>()))
      throw Error(what + ": " + (path.empty() ? std::string("the value") : printable(path, 200)) + " is not finite (" + why + ")");
    if (v->is_object())
      for (auto it = v->rbegin(); it != v->rend(); ++it) todo.emplace_back(&it.value(), path + (path.empty() ? "" : ".") + it.key());
    else if (v->is_array())
      for (std::size_t i = v->size(); i-- > 0;) todo.emplace_back(&(*v)[i], path + "[" + std::to_string(i) + "]");
  }
}

std::string json_brief(const nlohmann::json& v, std::size_t limit) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return printable(s, limit);
}

}  // namespace headsep
