// headsep tokenize --model DIR: texts in, token ids and tokens out (JSON lines), with the model
// folder's tokenizer exactly as `run --model` uses it, so ids can be diffed against Hugging Face
// `tokenizers` without running the model (docs/MODEL.md, "Tokenizer").
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.hpp"
#include "headsep/error.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/output.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep::cli {

CLI::App* add_tokenize(CLI::App& app, TokenizeArgs& t) {
  auto* c = app.add_subcommand("tokenize",
                               "Token ids and tokens of texts with a model folder's tokenizer, as JSON lines "
                               "{index, ids, tokens, truncated}");
  c->add_option("--model", t.model, "Model folder (config.json, and tokenizer.json or vocab.txt; tokenizer_config.json when present)")
      ->required();
  c->add_option("input", t.input,
                "Texts, one per line (a trailing CR and the file's UTF-8 BOM dropped); .jsonl/.json: objects with \"text\" (and optional "
                "\"report_id\", echoed). Default: standard input, unless --text is given");
  c->add_option("--text", t.texts, "A text to tokenize (repeatable; before the input's)");
  c->add_option("--format", t.format, "The input's format: lines, jsonl, or auto (from the extension)")
      ->check(CLI::IsMember({"auto", "lines", "jsonl"}))
      ->capture_default_str();
  c->add_option("--max-tokens", t.max_tokens,
                "Tokens per text incl. [CLS]/[SEP] (BPE: the template's, e.g. <s>), longer texts truncated (0 = the folder's truncation length)")
      ->capture_default_str();
  c->add_option("--output,-o", t.output, "Write to this file (atomically) instead of stdout");
  return c;
}

namespace {

/// One text's line: {"index", ["report_id",] "ids", "tokens", "truncated"}.
std::string encode_line(const TextTokenizer& wp, std::uint64_t index, const std::string* id, std::string_view text,
                        Encoding& e) {
  wp.encode(text, e);
  std::string o = "{\"index\":" + std::to_string(index);
  if (id) o += ",\"report_id\":", append_json_string(o, *id);
  o += ",\"ids\":[";
  for (std::size_t i = 0; i < e.ids.size(); ++i) o += (i ? "," : "") + std::to_string(e.ids[i]);
  o += "],\"tokens\":[";
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    if (i) o += ',';
    append_json_string(o, wp.token(e.ids[i]));
  }
  o += e.truncated ? "],\"truncated\":true}\n" : "],\"truncated\":false}\n";
  return o;
}

}  // namespace

int tokenize_cmd(const TokenizeArgs& t) {
  if (t.max_tokens < 0) throw UsageError("--max-tokens must be 0 (the model folder's) or >= 2, got " + std::to_string(t.max_tokens));
  ModelTokenizer mt;
  try {
    mt = ModelTokenizer::load(t.model, t.max_tokens);
  } catch (const UsageError& e) {  // max_tokens out of range: the option's name, not the plugin parameter's
    std::string m = e.what();
    if (m.rfind("parameter 'max_tokens'", 0) == 0) m = "--max-tokens" + m.substr(22);
    throw UsageError(m);
  }
  const std::string in_name = t.input.empty() || t.input == "-" ? "<stdin>" : t.input;
  const bool jsonl = t.format == "jsonl" || (t.format == "auto" && (in_name.ends_with(".jsonl") || in_name.ends_with(".json")));
  OutputFile out(t.output);
  Encoding e;
  std::uint64_t index = 0;
  for (const auto& text : t.texts) {
    try {
      out.write(encode_line(*mt.tokenizer, index, nullptr, text, e));
    } catch (const Error& err) {
      throw Error("--text " + std::to_string(index + 1) + ": " + err.what());
    }
    ++index;
  }
  if (!t.texts.empty() && t.input.empty()) {
    out.commit();
    return 0;
  }
  std::ifstream file;
  if (in_name != "<stdin>") {
    file.open(t.input, std::ios::binary);
    if (!file) throw Error(t.input + ": cannot open");
  }
  std::istream& in = in_name == "<stdin>" ? std::cin : file;
  std::string line;
  for (std::uint64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A UTF-8 byte order mark starts the file, not its first text (as the text plugin's CSV and
    // JSON-lines readers and `run --input` drop it).
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    const std::string where = in_name + ":" + std::to_string(line_no) + ": ";
    std::string text = line, id;
    bool has_id = false;
    if (jsonl) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines between objects
      JsonProblem problem;
      auto parsed = try_parse_json(line, problem);
      if (!parsed) throw InputError(in_name, line_no, "", problem.in_line());
      nlohmann::json& j = *parsed;
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        throw InputError(in_name, line_no, "", "expected an object with a string \"text\"");
      text = j["text"].get<std::string>();
      if (j.contains("report_id")) {
        has_id = true;
        id = j["report_id"].is_string() ? j["report_id"].get<std::string>() : j["report_id"].dump();
      }
    }
    try {
      out.write(encode_line(*mt.tokenizer, index, has_id ? &id : nullptr, text, e));
    } catch (const Error& err) {
      throw InputError(in_name, line_no, "", err.what());
    }
    ++index;
  }
  if (in.bad()) throw Error(in_name + ": read error");
  out.commit();
  return 0;
}

}  // namespace headsep::cli
