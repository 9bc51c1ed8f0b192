// ModelTokenizer (headsep/model_tokenizer.hpp): a model folder's tokenizer files read and checked
// against each other and the model, so a vocab.txt that does not match its model is refused at
// load instead of shifting ids, and truncation is the length the folder's tokenizer says.
#include "headsep/model_tokenizer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "model/tokenizer_json.hpp"
#include "model/weights.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::optional<std::string> read_optional(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(p.string() + ": cannot read");
  return ss.str();
}

json parse_object(const std::string& text, const fs::path& p) {
  const json j = parse_json(text, p.string());
  if (!j.is_object()) throw Error(p.string() + ": expected a JSON object");
  return j;
}

/// The folder's files, parsed once.
struct Files {
  fs::path dir;
  BertConfig config;
  std::optional<json> tokenizer, tokenizer_config;  // tokenizer.json, tokenizer_config.json
  std::string name(const char* file) const { return (dir / file).string(); }

  explicit Files(const fs::path& d) : dir(d) {
    const auto cfg = read_optional(dir / "config.json");
    if (!cfg) throw Error(name("config.json") + ": cannot open (a model folder holds config.json and vocab.txt)");
    const json c = parse_object(*cfg, dir / "config.json");
    if (c.value("model_type", json("bert")).is_string() && is_encoder_model_type(c.value("model_type", std::string("bert")))) {
      config = BertConfig::parse(*cfg, name("config.json"));
    } else {  // a decoder's folder: only the sizes the tokenizer needs (n_positions: GPT-2's name)
      const std::string file = name("config.json");
      config.vocab_size = model::json_uint(c, "vocab_size", file);  // range-checked in full width
      config.max_positions = model::json_uint_alias(c, "max_position_embeddings", "n_positions", file);
    }
    if (auto t = read_optional(dir / "tokenizer.json")) tokenizer = tokjson::parse(*t, name("tokenizer.json"));
    if (auto t = read_optional(dir / "tokenizer_config.json"))
      tokenizer_config = parse_object(*t, dir / "tokenizer_config.json");
  }
};

/// A positive integer field's value, or nullopt when absent/null; Error when anything else.
std::optional<std::uint64_t> positive(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& v = j[key];
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > 0) return v.get<std::uint64_t>();
  if (v.is_number_float() && v.get<double>() >= 1e18) return std::uint64_t(-1);  // HF's int(1e30) as a float
  throw Error(where + ": '" + key + "' must be a positive integer, got " + v.dump());
}

TruncationLength resolve_truncation(const Files& f, std::int64_t max_tokens) {
  const std::uint32_t P = f.config.max_positions;
  const std::string positions = "the model's max_position_embeddings (" + std::to_string(P) + ", " + f.name("config.json") + ")";
  if (max_tokens != 0) {
    if (max_tokens < 2 || max_tokens > std::int64_t(P))
      throw UsageError("parameter 'max_tokens' must be 0 (the model folder's truncation length) or 2.." + std::to_string(P) +
                       " (" + positions + "), got " + std::to_string(max_tokens));
    return {static_cast<std::uint32_t>(max_tokens), "max_tokens"};
  }
  TruncationLength t;
  std::string where;
  if (f.tokenizer && f.tokenizer->contains("truncation") && (*f.tokenizer)["truncation"].is_object()) {
    where = f.name("tokenizer.json") + " truncation";
    if (auto n = positive((*f.tokenizer)["truncation"], "max_length", where)) t = {std::uint32_t(std::min<std::uint64_t>(*n, 1u << 30)), "tokenizer.json truncation.max_length"};
  }
  if (!t.tokens && f.tokenizer_config) {
    where = f.name("tokenizer_config.json");
    if (auto n = positive(*f.tokenizer_config, "model_max_length", where); n && *n < 1000000000000000000ull)
      t = {std::uint32_t(std::min<std::uint64_t>(*n, 1u << 30)), "tokenizer_config.json model_max_length"};
  }
  if (!t.tokens) return {P, "config.json max_position_embeddings"};
  if (t.tokens < 2 || t.tokens > P)
    throw Error(where + ": a truncation length of " + std::to_string(t.tokens) + " tokens is outside 2.." +
                std::to_string(P) + " (" + positions + ")");
  return t;
}


/// tokenizer.json's vocabulary and added tokens against vocab.txt: the same ids. Returns the
/// special tokens to match in raw text.
std::vector<std::string> check_vocab(const json& t, const std::string& file, const WordPiece& wp, const std::string& vocab) {
  const json& v = t["model"].value("vocab", json());
  if (v.is_object()) {
    if (v.size() != wp.size())
      throw Error(vocab + ": " + std::to_string(wp.size()) + " entries, but " + file + "'s vocabulary has " +
                  std::to_string(v.size()) + " (a line missing or extra shifts every later id)");
    for (std::uint32_t id = 0; id < wp.size(); ++id) {
      const auto it = v.find(wp.token(id));
      if (it == v.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() != id)
        throw Error(vocab + ":" + std::to_string(id + 1) + ": this entry has id " + std::to_string(id) + " here but " +
                    (it == v.end() ? std::string("is not in ") + file + "'s vocabulary" : "id " + it->dump() + " in " + file) +
                    " (a line missing, extra or moved shifts the ids)");
    }
  }
  return tokjson::wordpiece_added(t, file, wp, "vocab.txt");
}

}  // namespace

TruncationLength ModelTokenizer::truncation_of(const fs::path& dir, std::int64_t max_tokens) {
  return resolve_truncation(Files(dir), max_tokens);
}

ModelTokenizer ModelTokenizer::load(const fs::path& dir, std::int64_t max_tokens) {
  const Files f(dir);
  ModelTokenizer mt;
  mt.truncation = resolve_truncation(f, max_tokens);
  mt.max_positions = f.config.max_positions;
  mt.vocab_size = f.config.vocab_size;
  const std::string rows = " the model's embedding table has " + std::to_string(mt.vocab_size) + " rows (" +
                           f.name("config.json") + " vocab_size)";
  std::error_code ec;
  const bool has_vocab_txt = fs::exists(dir / "vocab.txt", ec);
  if (f.tokenizer) {
    const std::string tj = f.name("tokenizer.json");
    // tokenizer.json first: BPE and Unigram always from it; WordPiece from it when there is no vocab.txt.
    if (tokjson::model_type(*f.tokenizer, tj) != "WordPiece" || !has_vocab_txt) {
      mt.tokenizer = tokenizer_from_json(f.tokenizer->dump(), tj, mt.truncation.tokens);
      if (mt.tokenizer->size() > mt.vocab_size)
        throw Error(tj + ": " + std::to_string(mt.tokenizer->size()) + " token ids, but" + rows + ": ids past the table");
      if (const auto* wp = dynamic_cast<const WordPiece*>(mt.tokenizer.get())) mt.wordpiece = *wp;
      return mt;
    }
  }
  WordPieceOptions o;
  o.max_length = mt.truncation.tokens;
  if (f.tokenizer) {
    try {
      o = tokjson::bert_pipeline(*f.tokenizer, f.name("tokenizer.json"));
      o.max_length = mt.truncation.tokens;
    } catch (const json::exception& e) {
      throw Error(f.name("tokenizer.json") + ": not a tokenizer headsep can read (" + json_error_text(e.what()) + ")");
    }
  } else if (f.tokenizer_config) {
    const json& c = *f.tokenizer_config;
    const std::string file = f.name("tokenizer_config.json");
    o.lowercase = model::json_bool(c, "do_lower_case", file, true);
    if (c.contains("strip_accents") && !c["strip_accents"].is_null())  // null: follow lowercasing
      o.strip_accents = std::int8_t(model::json_bool(c, "strip_accents", file, false));
    if (!model::json_bool(c, "tokenize_chinese_chars", file, true))
      throw Error(f.name("tokenizer_config.json") + ": tokenize_chinese_chars false is not supported");
  }
  const std::string vocab = f.name("vocab.txt");
  if (!has_vocab_txt) throw Error(vocab + ": cannot open the vocabulary (a model folder holds tokenizer.json or vocab.txt)");
  mt.wordpiece = WordPiece::from_file(dir / "vocab.txt", o);
  const std::size_t lines = mt.wordpiece.size();
  std::vector<std::string> specials;
  if (f.tokenizer) {
    try {
      specials = check_vocab(*f.tokenizer, f.name("tokenizer.json"), mt.wordpiece, vocab);
    } catch (const json::exception& e) {
      throw Error(f.name("tokenizer.json") + ": not a tokenizer headsep can read (" + json_error_text(e.what()) + ")");
    }
  }
  if (lines > mt.vocab_size)
    throw Error(vocab + ": " + std::to_string(lines) + " entries, but" + rows +
                ": ids past the table (an extra line shifts every later id)");
  const bool confirmed = f.tokenizer && (*f.tokenizer)["model"].value("vocab", json()).is_object();
  if (lines < mt.vocab_size && !confirmed)
    throw Error(vocab + ": " + std::to_string(lines) + " entries, but" + rows +
                " (a missing line shifts every later id; a table padded past its vocabulary needs tokenizer.json's "
                "vocabulary to confirm vocab.txt)");
  if (f.tokenizer) mt.wordpiece.set_special_tokens(specials, f.name("tokenizer.json"));
  mt.tokenizer = std::make_shared<const WordPiece>(mt.wordpiece);
  return mt;
}

}  // namespace headsep
