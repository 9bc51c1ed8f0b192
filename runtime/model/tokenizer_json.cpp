// tokenizer.json -> a tokenizer (headsep/tokenizer.hpp, tokenizer_json.hpp): every component the
// families use is read (WordPiece; BPE byte-level, GPT-2's regex or Llama 3's / Qwen2's Split;
// BPE byte-fallback with Metaspace or Prepend + Replace; Unigram with SentencePiece's Precompiled
// normalizer and Replace " {2,}", as XLM-R), every other one refused by its JSON
// path, never ignored. Decoders and padding do not change ids and are not read.
#include "model/tokenizer_json.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "headsep/error.hpp"
#include "headsep/tokenizer.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/unigram.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace tokjson {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& name, const std::string& path, const std::string& what) {
  throw Error(name + ": " + path + " " + what);
}
std::string str_at(const json& j, const char* key, const std::string& name, const std::string& path, const char* def = nullptr) {
  if (!j.contains(key) || j[key].is_null()) {
    if (def) return def;
    refuse(name, path + "." + key, "is missing");
  }
  if (!j[key].is_string()) refuse(name, path + "." + key, "must be a string, got " + j[key].dump().substr(0, 60));
  return j[key].get<std::string>();
}
bool bool_at(const json& j, const char* key, bool def, const std::string& name, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) refuse(name, path + "." + key, "must be true or false, got " + j[key].dump().substr(0, 60));
  return j[key].get<bool>();
}
std::string type_of(const json& j, const std::string& name, const std::string& path) {
  if (!j.is_object()) refuse(name, path, "must be an object, got " + j.dump().substr(0, 60));
  return str_at(j, "type", name, path);
}
[[noreturn]] void unsupported(const std::string& name, const std::string& path, const std::string& type) {
  refuse(name, path + ".type", "'" + type + "' is not supported");
}
std::uint32_t id_of(const json& v, const std::string& name, const std::string& path) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 0x7fffffff) refuse(name, path, "must be a token id, got " + v.dump().substr(0, 40));
  return v.get<std::uint32_t>();
}

void read_normalizer(const json& n, const std::string& name, const std::string& path, std::vector<bpe::NormStep>& out) {
  if (n.is_null()) return;
  const std::string t = type_of(n, name, path);
  if (t == "Sequence") {
    const json& list = n.value("normalizers", json());
    if (!list.is_array()) refuse(name, path + ".normalizers", "must be an array");
    for (std::size_t i = 0; i < list.size(); ++i) read_normalizer(list[i], name, path + ".normalizers[" + std::to_string(i) + "]", out);
  } else if (t == "Prepend") {
    out.push_back({bpe::NormStep::kPrepend, "", str_at(n, "prepend", name, path)});
  } else if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    out.push_back({t == "NFC" ? bpe::NormStep::kNfc : t == "NFD" ? bpe::NormStep::kNfd : t == "NFKC" ? bpe::NormStep::kNfkc : bpe::NormStep::kNfkd, "", ""});
  } else if (t == "Lowercase") {
    out.push_back({bpe::NormStep::kLowercase, "", ""});
  } else if (t == "Replace") {
    const json& p = n.value("pattern", json());
    if (p.is_object() && p.contains("Regex")) {  // SentencePiece conversions' one regex: runs of spaces
      if (str_at(p, "Regex", name, path + ".pattern") != " {2,}")
        refuse(name, path + ".pattern.Regex", p["Regex"].dump().substr(0, 60) + " is not supported (\" {2,}\" is)");
      out.push_back({bpe::NormStep::kReplaceSpaceRuns, "", str_at(n, "content", name, path)});
      return;
    }
    if (!p.is_object() || !p.contains("String")) refuse(name, path + ".pattern", "must be {\"String\": ...} or {\"Regex\": \" {2,}\"}");
    out.push_back({bpe::NormStep::kReplace, str_at(p, "String", name, path + ".pattern"), str_at(n, "content", name, path)});
  } else if (t == "Precompiled") {
    const std::string at = path + ".precompiled_charsmap";
    out.push_back({bpe::NormStep::kPrecompiled, "", "",
                   std::make_shared<const bpe::Precompiled>(str_at(n, "precompiled_charsmap", name, path), name + ": " + at)});
  } else {
    unsupported(name, path, t);
  }
}

/// A Split pre-tokenizer: one of the patterns bpe_split.hpp knows, exactly, behavior Isolated, not
/// inverted.
bpe::SplitRegex read_split(const json& p, const std::string& name, const std::string& path) {
  const json& pat = p.value("pattern", json());
  if (!pat.is_object() || !pat.contains("Regex")) refuse(name, path + ".pattern", "must be {\"Regex\": ...} (String patterns are not supported)");
  const auto r = bpe::split_regex_of(str_at(pat, "Regex", name, path + ".pattern"));
  if (!r) refuse(name, path + ".pattern.Regex", pat["Regex"].dump().substr(0, 80) + " is not supported (Llama 3's and Qwen2's patterns are)");
  if (const std::string b = str_at(p, "behavior", name, path); b != "Isolated")
    refuse(name, path + ".behavior", json(b).dump().substr(0, 40) + " is not supported (Isolated is)");
  if (bool_at(p, "invert", false, name, path)) refuse(name, path + ".invert", "true is not supported");
  return *r;
}

void read_pre_tokenizer(const json& p, const std::string& name, const std::string& path, bpe::PreTokenizer& out) {
  if (p.is_null()) return;
  const std::string t = type_of(p, name, path);
  if (t == "Sequence") {
    const json& list = p.value("pretokenizers", json());
    const std::string lp = path + ".pretokenizers";
    if (list.is_array() && list.size() == 2 && list[0].is_object() && list[0].value("type", json()) == "Split") {
      const bpe::SplitRegex r = read_split(list[0], name, lp + "[0]");  // Llama 3, Qwen2: Split, then bytes
      read_pre_tokenizer(list[1], name, lp + "[1]", out);
      if (out.kind != bpe::PreTokenizer::kByteLevel || out.regex != bpe::SplitRegex::kNone || out.add_prefix_space)
        refuse(name, lp + "[1]", "after a Split must be ByteLevel with use_regex false and add_prefix_space false");
      out.regex = r;
      return;
    }
    if (list.is_array() && list.empty()) return;  // no pre-tokenizer
    if (!list.is_array() || list.size() != 1)
      refuse(name, lp, "must hold exactly one pre-tokenizer, or a Split and a ByteLevel (other Sequences are not supported)");
    return read_pre_tokenizer(list[0], name, lp + "[0]", out);
  }
  if (t == "ByteLevel") {
    out.kind = bpe::PreTokenizer::kByteLevel;
    out.add_prefix_space = bool_at(p, "add_prefix_space", true, name, path);
    out.regex = bool_at(p, "use_regex", true, name, path) ? bpe::SplitRegex::kGpt2 : bpe::SplitRegex::kNone;
  } else if (t == "Split") {
    read_split(p, name, path);
    refuse(name, path, "Split alone is not supported (only in a Sequence before a ByteLevel, as Llama 3 and Qwen2 write it)");
  } else if (t == "Metaspace") {
    out.kind = bpe::PreTokenizer::kMetaspace;
    out.replacement = str_at(p, "replacement", name, path);
    // One character, as tokenizers' (a char there: it refuses any other string).
    const auto* r = reinterpret_cast<const unsigned char*>(out.replacement.data());
    if (out.replacement.empty() || bpe::utf8_len(r[0]) != out.replacement.size())
      refuse(name, path + ".replacement", json(out.replacement).dump().substr(0, 40) + " must be one character");
    out.split = bool_at(p, "split", true, name, path);
    // prepend_scheme (default always) decides; the older add_prefix_space may only agree with it:
    // false with any scheme but never is refused, as tokenizers refuses it.
    const std::string s = str_at(p, "prepend_scheme", name, path, "always");
    if (s == "always") out.prepend = bpe::PreTokenizer::kAlways;
    else if (s == "first") out.prepend = bpe::PreTokenizer::kFirst;
    else if (s == "never") out.prepend = bpe::PreTokenizer::kNever;
    else refuse(name, path + ".prepend_scheme", "'" + s + "' is not supported (always, first, never)");
    if (!bool_at(p, "add_prefix_space", true, name, path) && out.prepend != bpe::PreTokenizer::kNever)
      refuse(name, path + ".add_prefix_space", "false does not match prepend_scheme '" + s + "' (give prepend_scheme never)");
  } else {
    unsupported(name, path, t);
  }
}

/// The post-processor's tokens before and after the text (ByteLevel adds none).
void read_post(const json& p, const std::string& name, const std::string& path, const std::vector<std::string>& tokens,
               std::vector<std::uint32_t>& prefix, std::vector<std::uint32_t>& suffix) {
  if (p.is_null()) return;
  const std::string t = type_of(p, name, path);
  auto check = [&](std::uint32_t id, const std::string& at) {
    if (id >= tokens.size()) refuse(name, at, "names id " + std::to_string(id) + ", past the vocabulary (" + std::to_string(tokens.size()) + ")");
    return id;
  };
  if (t == "Sequence") {
    const json& list = p.value("processors", json());
    if (!list.is_array()) refuse(name, path + ".processors", "must be an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::vector<std::uint32_t> pre, post;
      read_post(list[i], name, path + ".processors[" + std::to_string(i) + "]", tokens, pre, post);
      prefix.insert(prefix.begin(), pre.begin(), pre.end());
      suffix.insert(suffix.end(), post.begin(), post.end());
    }
  } else if (t == "ByteLevel") {
  } else if (t == "BertProcessing" || t == "RobertaProcessing") {
    for (const char* k : {"cls", "sep"}) {
      const json& v = p.value(k, json());
      if (!v.is_array() || v.size() != 2) refuse(name, path + "." + k, "must be [token, id]");
      (k[0] == 'c' ? prefix : suffix).push_back(check(id_of(v[1], name, path + "." + k + "[1]"), path + "." + k));
    }
  } else if (t == "TemplateProcessing") {
    const json& single = p.value("single", json());
    if (!single.is_array()) refuse(name, path + ".single", "must be an array");
    bool seen_a = false;
    for (std::size_t i = 0; i < single.size(); ++i) {
      const std::string at = path + ".single[" + std::to_string(i) + "]";
      const json& e = single[i];
      if (e.is_object() && e.contains("Sequence")) {
        if (seen_a || str_at(e["Sequence"], "id", name, at + ".Sequence") != "A") refuse(name, at, "must be the one sequence A");
        seen_a = true;
      } else if (e.is_object() && e.contains("SpecialToken")) {
        const std::string id = str_at(e["SpecialToken"], "id", name, at + ".SpecialToken");
        const json& st = p.value("special_tokens", json()).value(id, json());
        if (!st.is_object() || !st.value("ids", json()).is_array())
          refuse(name, path + ".special_tokens", "has no entry '" + id + "' with ids");
        for (std::size_t k = 0; k < st["ids"].size(); ++k) {
          const std::string ap = path + ".special_tokens." + id + ".ids[" + std::to_string(k) + "]";
          (seen_a ? suffix : prefix).push_back(check(id_of(st["ids"][k], name, ap), ap));
        }
      } else {
        refuse(name, at, "must be a SpecialToken or a Sequence");
      }
    }
    if (!seen_a) refuse(name, path + ".single", "has no sequence A");
  } else {
    unsupported(name, path, t);
  }
}

void read_added(const json& t, const std::string& name, std::vector<bpe::AddedToken>& out) {
  const json& list = t.value("added_tokens", json::array());
  if (!list.is_array()) refuse(name, "added_tokens", "must be an array");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    const json& a = list[i];
    if (!a.is_object()) refuse(name, at, "must be an object");
    bpe::AddedToken x;
    x.content = str_at(a, "content", name, at);
    if (x.content.empty()) refuse(name, at + ".content", "must not be empty");
    x.id = id_of(a.value("id", json()), name, at + ".id");
    x.special = bool_at(a, "special", false, name, at);
    x.single_word = bool_at(a, "single_word", false, name, at);
    x.lstrip = bool_at(a, "lstrip", false, name, at);
    x.rstrip = bool_at(a, "rstrip", false, name, at);
    x.normalized = bool_at(a, "normalized", !x.special, name, at);
    out.push_back(std::move(x));
  }
}

/// tokenizers reads added tokens one by one and gives each, whatever the file says, the id its
/// content already has (an earlier added token's, else model.vocab's), else the next one past
/// model.vocab's entry count and the added tokens so far (it only warns when the file disagrees).
/// A file that disagrees would be read with other ids there: refused.
void check_added_ids(const bpe::BpeSpec& spec, const std::string& name) {
  const std::size_t n_vocab = spec.vocab.size();
  bpe::Vocab given;
  std::int64_t max_added = -1;
  for (std::size_t i = 0; i < spec.added.size(); ++i) {
    const bpe::AddedToken& a = spec.added[i];
    std::uint64_t want;
    if (const auto it = given.find(a.content); it != given.end()) want = it->second;
    else if (const auto iv = spec.vocab.find(a.content); iv != spec.vocab.end()) want = iv->second;
    else if (max_added < 0) want = n_vocab;
    else want = std::uint64_t(max_added) >= n_vocab || n_vocab == 0 ? std::uint64_t(max_added) + 1 : n_vocab;
    given.emplace(a.content, static_cast<std::uint32_t>(want));
    max_added = std::max<std::int64_t>(max_added, static_cast<std::int64_t>(want));
    if (a.id != want)
      refuse(name, "added_tokens[" + std::to_string(i) + "]", "'" + a.content.substr(0, 40) + "' has id " + std::to_string(a.id) +
             ", but tokenizers gives it id " + std::to_string(want) + " (its model.vocab id, else the next past model.vocab's " +
             std::to_string(n_vocab) + " entries and the added tokens before it)");
  }
}

void check_truncation(const json& t, const std::string& name) {
  const json& tr = t.value("truncation", json());
  if (tr.is_null()) return;
  if (!tr.is_object()) refuse(name, "truncation", "must be an object or null");
  if (tr.contains("direction") && tr["direction"] != "Right")
    refuse(name, "truncation.direction", tr["direction"].dump() + " is not supported (texts are cut at the right)");
}

/// The parts after the model, BPE's and Unigram's alike: added tokens, post-processor, truncation.
std::unique_ptr<TextTokenizer> finish(const json& t, const std::string& name, bpe::BpeSpec spec) {
  const std::uint32_t max_length = spec.max_length;
  read_added(t, name, spec.added);
  check_added_ids(spec, name);
  for (std::size_t i = 0; i < spec.added.size(); ++i)
    if (spec.added[i].id >= spec.tokens.size() || spec.tokens[spec.added[i].id] != spec.added[i].content)
      refuse(name, "added_tokens[" + std::to_string(i) + "]", "'" + spec.added[i].content.substr(0, 40) + "' has id " +
             std::to_string(spec.added[i].id) + ", which model.vocab gives to another token");
  read_post(t.value("post_processor", json()), name, "post_processor", spec.tokens, spec.prefix, spec.suffix);
  check_truncation(t, name);
  if (max_length <= spec.prefix.size() + spec.suffix.size())
    throw Error(name + ": a truncation length of " + std::to_string(max_length) + " tokens leaves no room beside the post-processor's " +
                std::to_string(spec.prefix.size() + spec.suffix.size()));
  return bpe::make_bpe_tokenizer(std::move(spec));
}

std::unique_ptr<TextTokenizer> bpe_from_json(const json& t, const std::string& name, std::uint32_t max_length) {
  const json& m = t["model"];
  bpe::BpeSpec spec;
  spec.name = name;
  spec.max_length = max_length;
  spec.tokens = vocab_by_id(t, name);
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) spec.vocab.emplace(it.key(), it.value().get<std::uint32_t>());
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0) refuse(name, "model.dropout", m["dropout"].dump() + " is not supported (ids would be random)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!str_at(m, k, name, "model", "").empty()) refuse(name, std::string("model.") + k, "'" + m[k].get<std::string>() + "' is not supported");
  spec.options.byte_fallback = bool_at(m, "byte_fallback", false, name, "model");
  spec.options.fuse_unk = bool_at(m, "fuse_unk", false, name, "model");
  spec.options.ignore_merges = bool_at(m, "ignore_merges", false, name, "model");
  if (const std::string unk = str_at(m, "unk_token", name, "model", ""); !unk.empty()) {
    const auto it = spec.vocab.find(unk);
    if (it == spec.vocab.end()) refuse(name, "model.unk_token", "'" + unk + "' is not in model.vocab");
    spec.options.unk = it->second;
  }
  const json& merges = m.value("merges", json());
  if (!merges.is_array()) refuse(name, "model.merges", "is missing (a BPE model needs its merges)");
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const std::size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        refuse(name, "model.merges[" + std::to_string(i) + "]", "'" + s.substr(0, 40) + "' is not two tokens separated by one space");
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      refuse(name, "model.merges[" + std::to_string(i) + "]", "must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  read_normalizer(t.value("normalizer", json()), name, "normalizer", spec.normalizer);
  read_pre_tokenizer(t.value("pre_tokenizer", json()), name, "pre_tokenizer", spec.pre);
  spec.options.byte_level = spec.pre.kind == bpe::PreTokenizer::kByteLevel;
  return finish(t, name, std::move(spec));
}

/// A Unigram model: vocab [[piece, score], ...] by id, unk_id (or null), byte_fallback; the rest
/// of the pipeline as BPE's (bpe_tokenizer.hpp).
std::unique_ptr<TextTokenizer> unigram_from_json(const json& t, const std::string& name, std::uint32_t max_length) {
  const json& m = t["model"];
  const json& v = m.value("vocab", json());
  if (!v.is_array() || v.empty()) refuse(name, "model.vocab", "must be a non-empty array of [piece, score]");
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      refuse(name, "model.vocab[" + std::to_string(i) + "]", "must be [piece, score], got " + e.dump().substr(0, 60));
    pieces.emplace_back(e[0].get<std::string>(), e[1].get<double>());
  }
  std::int64_t unk = -1;
  if (m.contains("unk_id") && !m["unk_id"].is_null()) {
    unk = id_of(m["unk_id"], name, "model.unk_id");
    if (unk >= static_cast<std::int64_t>(pieces.size()))
      refuse(name, "model.unk_id", std::to_string(unk) + " is past the vocabulary (" + std::to_string(pieces.size()) + " pieces)");
  }
  bpe::BpeSpec spec;
  spec.name = name;
  spec.max_length = max_length;
  spec.kind = "unigram";
  spec.model = std::make_shared<const unigram::Model>(pieces, unk, bool_at(m, "byte_fallback", false, name, "model"), name + ": model.vocab");
  for (auto& p : pieces) spec.vocab.emplace(p.first, static_cast<std::uint32_t>(spec.tokens.size())), spec.tokens.push_back(std::move(p.first));
  // Added tokens past the pieces take the next ids (check_added_ids in finish holds them to that).
  std::vector<std::pair<std::uint64_t, std::string>> beyond;
  for (const json& a : t.value("added_tokens", json::array()))
    if (a.is_object() && a.value("content", json()).is_string() && a.value("id", json()).is_number_unsigned() &&
        a["id"].get<std::uint64_t>() >= spec.tokens.size() && !spec.vocab.count(a["content"].get<std::string>()))
      beyond.emplace_back(a["id"].get<std::uint64_t>(), a["content"].get<std::string>());
  std::sort(beyond.begin(), beyond.end());
  for (auto& [id, content] : beyond)
    if (id == spec.tokens.size()) spec.tokens.push_back(std::move(content));
  read_normalizer(t.value("normalizer", json()), name, "normalizer", spec.normalizer);
  read_pre_tokenizer(t.value("pre_tokenizer", json()), name, "pre_tokenizer", spec.pre);
  if (spec.pre.kind == bpe::PreTokenizer::kByteLevel) refuse(name, "pre_tokenizer", "ByteLevel is not supported with a Unigram model");
  return finish(t, name, std::move(spec));
}

}  // namespace

json parse(std::string_view bytes, const std::string& name) {
  const json j = parse_json(bytes, name);
  if (!j.is_object()) throw Error(name + ": expected a JSON object");
  return j;
}

std::string model_type(const json& t, const std::string& name) {
  const std::string type = type_of(t.value("model", json()), name, "model");
  if (type != "WordPiece" && type != "BPE" && type != "Unigram") unsupported(name, "model", type);
  return type;
}

std::vector<std::string> vocab_by_id(const json& t, const std::string& name) {
  const json& v = t["model"].value("vocab", json());
  if (!v.is_object()) refuse(name, "model.vocab", "is missing or not an object of token: id");
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  // Ids run 0..n-1 over the entries given, so a larger id is a lie, refused before the table grows to it.
  const json& added = t.value("added_tokens", json::array());
  const std::size_t entries = v.size() + (added.is_array() ? added.size() : 0);
  auto put = [&](const std::string& tok, std::uint32_t id, const char* where) {
    if (id >= entries)
      refuse(name, where, "gives '" + printable(tok, 40) + "' id " + std::to_string(id) + ", but holds " +
             std::to_string(entries) + " tokens with added_tokens (ids must be 0.." + std::to_string(entries - 1) + ")");
    if (id >= tokens.size()) tokens.resize(id + 1), seen.resize(id + 1);
    if (seen[id] && tokens[id] != tok) refuse(name, "model.vocab", "gives id " + std::to_string(id) + " to '" + tokens[id].substr(0, 40) + "' and '" + tok.substr(0, 40) + "'");
    tokens[id] = tok, seen[id] = true;
  };
  for (auto it = v.begin(); it != v.end(); ++it) put(it.key(), id_of(it.value(), name, "model.vocab." + it.key().substr(0, 40)), "model.vocab");
  for (const json& a : added.is_array() ? added : json::array())  // added tokens may extend the vocabulary
    if (a.is_object() && a.value("content", json()).is_string() && a.value("id", json()).is_number_unsigned() && a["id"].get<std::uint64_t>() < 0x7fffffff)
      if (a["id"].get<std::uint32_t>() >= tokens.size() || !seen[a["id"].get<std::uint32_t>()]) put(a["content"].get<std::string>(), a["id"].get<std::uint32_t>(), "added_tokens");
  for (std::size_t id = 0; id < tokens.size(); ++id)
    if (!seen[id]) refuse(name, "model.vocab", "has no token with id " + std::to_string(id) + " (ids must be 0.." + std::to_string(tokens.size() - 1) + ")");
  if (tokens.empty()) refuse(name, "model.vocab", "is empty");
  return tokens;
}

WordPieceOptions bert_pipeline(const json& t, const std::string& name) {
  WordPieceOptions o;
  const json& n = t.value("normalizer", json());
  if (const std::string ty = type_of(n, name, "normalizer"); ty != "BertNormalizer") unsupported(name, "normalizer", ty);
  if (!bool_at(n, "clean_text", true, name, "normalizer")) refuse(name, "normalizer.clean_text", "false is not supported");
  if (!bool_at(n, "handle_chinese_chars", true, name, "normalizer")) refuse(name, "normalizer.handle_chinese_chars", "false is not supported");
  o.lowercase = bool_at(n, "lowercase", true, name, "normalizer");
  const json& sa = n.value("strip_accents", json());
  o.strip_accents = sa.is_boolean() ? std::int8_t(sa.get<bool>()) : std::int8_t(-1);
  if (const std::string ty = type_of(t.value("pre_tokenizer", json()), name, "pre_tokenizer"); ty != "BertPreTokenizer")
    unsupported(name, "pre_tokenizer", ty);
  const json& m = t["model"];
  if (str_at(m, "unk_token", name, "model", "[UNK]") != "[UNK]") refuse(name, "model.unk_token", "other than [UNK] is not supported");
  if (str_at(m, "continuing_subword_prefix", name, "model", "##") != "##")
    refuse(name, "model.continuing_subword_prefix", "other than ## is not supported");
  if (m.contains("max_input_chars_per_word") && !m["max_input_chars_per_word"].is_null())
    o.max_chars = std::min<std::uint32_t>(id_of(m["max_input_chars_per_word"], name, "model.max_input_chars_per_word"), 1u << 30);
  const json& pp = t.value("post_processor", json());
  std::vector<std::string> names;  // the vocabulary is not needed to read the template's shape
  std::vector<std::uint32_t> pre, post;
  const std::string pt = pp.is_object() ? str_at(pp, "type", name, "post_processor", "") : "";
  if (pt != "BertProcessing" && pt != "TemplateProcessing") refuse(name, "post_processor", pp.dump().substr(0, 80) + " is not [CLS] A [SEP]");
  bool ok = pt == "BertProcessing";
  if (pt == "TemplateProcessing") {
    const json& s = pp.value("single", json());
    auto piece = [&](std::size_t i, const char* kind) {
      const json e = s.is_array() && i < s.size() && s[i].is_object() ? s[i].value(kind, json()) : json();
      return e.is_object() && e.value("id", json()).is_string() ? e["id"].get<std::string>() : std::string();
    };
    ok = s.is_array() && s.size() == 3 && piece(0, "SpecialToken") == "[CLS]" && piece(1, "Sequence") == "A" &&
         piece(2, "SpecialToken") == "[SEP]";
  }
  if (!ok) refuse(name, "post_processor.single", pp.value("single", json()).dump().substr(0, 80) + " is not [CLS] A [SEP]");
  check_truncation(t, name);
  return o;
}

std::vector<std::string> wordpiece_added(const json& t, const std::string& name, const WordPiece& wp, const std::string& vocab_name) {
  std::vector<bpe::AddedToken> added;
  read_added(t, name, added);
  std::vector<std::string> specials;
  for (std::size_t i = 0; i < added.size(); ++i) {
    const auto& a = added[i];
    const std::int64_t have = wp.find(a.content);
    if (have != a.id)
      throw Error(name + ": added token '" + a.content.substr(0, 40) + "' has id " + std::to_string(a.id) + ", but " + vocab_name +
                  " gives it " + (have < 0 ? "none" : "id " + std::to_string(have)) + " (added tokens beyond the vocabulary are not supported)");
    if (a.normalized || a.lstrip || a.rstrip || a.single_word)
      throw Error(name + ": added token '" + a.content.substr(0, 40) + "' (added_tokens[" + std::to_string(i) +
                  "]): normalized, lstrip, rstrip or single_word true is not supported with WordPiece (matched as given in raw text)");
    specials.push_back(a.content);
  }
  return specials;
}

}  // namespace tokjson

std::unique_ptr<TextTokenizer> tokenizer_from_json(std::string_view bytes, const std::string& name, std::uint32_t max_length) {
  const nlohmann::json t = tokjson::parse(bytes, name);
  try {
    const std::string type = tokjson::model_type(t, name);
    if (type == "BPE") return tokjson::bpe_from_json(t, name, max_length);
    if (type == "Unigram") return tokjson::unigram_from_json(t, name, max_length);
    WordPieceOptions o = tokjson::bert_pipeline(t, name);
    o.max_length = max_length;
    auto wp = std::make_unique<WordPiece>(WordPiece::from_tokens(tokjson::vocab_by_id(t, name), name + " model.vocab", o));
    wp->set_special_tokens(tokjson::wordpiece_added(t, name, *wp, "model.vocab"), name);
    return wp;
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": not a tokenizer headsep can read (" + json_error_text(e.what()) + ")");
  }
}

std::unique_ptr<TextTokenizer> tokenizer_from_json_file(const std::filesystem::path& file, std::uint32_t max_length) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(file.string() + ": cannot read");
  return tokenizer_from_json(ss.str(), file.string(), max_length);
}

}  // namespace headsep
