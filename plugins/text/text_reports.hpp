// Shared by the `text` and `ops-text` generators: text -> WordPiece tokens of a model's
// vocab.txt, each token with its id (feature `token_id`, for `headsep run --model`) and the
// context-axis values of its word from a lexicon (features named by the lexicon's header).
//
// Lexicon: CSV, header `word,AXIS1,AXIS2,...`, then one word per line with its values. Words are
// normalised as the tokenizer normalises text (lower case, accents stripped, Hangul decomposed),
// so `Café` and `cafe` are one entry; an entry must be one word after that. Every token of a word
// gets the word's values; words not in the lexicon, [CLS] and [SEP] get 0. BPE models: a word is
// a pre-tokenizer piece without its marker (Ġ / ▁), case kept (docs/MODEL.md).
// After the lexicon's, the token-class features (headsep/context_axes.hpp, docs/METRICS.md):
// position j / (n − 1), punctuation (the token's word is punctuation only), word_start (the first
// token of a word) — axes any text has, whatever its lexicon hits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/plugin_sdk.hpp"
#include "headsep/context_axes.hpp"
#include "headsep/model_tokenizer.hpp"
#include "headsep/tokenizer.hpp"

namespace headsep_text {

using headsep::sdk::PluginError;

/// The built-in lexicon of the operations domain (the seed's relations: decision, evidence,
/// condition), the seed's own Korean tokens with the seed's values among them.
inline constexpr std::string_view kOpsLexicon = R"(word,decision_axis,evidence_axis,condition_axis
정지결정,1.6,0.2,0.1
보류결정,1.5,0.2,0.2
차단작업,1.4,0.3,0.1
재가동승인,1.3,0.2,0.6
압력이상,0.4,0.9,0.3
진동기록,0.2,1.4,0.2
잠금확인,0.3,1.1,0.5
온도상승,0.2,1.5,0.2
복귀조건,1.8,0.1,0.8
재가동조건,0.6,0.2,1.6
예외조건,0.3,0.3,1.5
분기조건,0.4,0.2,1.4
stop,1.6,0.2,0.1
stopped,1.6,0.2,0.1
shutdown,1.6,0.2,0.2
halt,1.5,0.1,0.2
hold,1.4,0.2,0.3
decision,1.6,0.3,0.2
ordered,1.4,0.2,0.1
approved,1.3,0.2,0.4
isolated,1.3,0.3,0.2
suspended,1.4,0.2,0.4
taken,1.1,0.1,0.1
issued,1.2,0.1,0.1
pressure,0.3,1.6,0.2
vibration,0.2,1.6,0.2
temperature,0.2,1.5,0.2
anomaly,0.4,1.5,0.3
abnormal,0.3,1.4,0.2
leak,0.3,1.4,0.2
spike,0.2,1.3,0.2
alarm,0.5,1.2,0.3
read,0.1,1.1,0.1
reached,0.1,1.1,0.2
rose,0.1,1.2,0.1
dropped,0.1,1.2,0.1
fell,0.1,1.2,0.1
sensor,0.1,1.1,0.2
confirmed,0.4,1.0,0.6
restart,0.6,0.2,1.6
return,0.5,0.1,1.7
resume,0.5,0.1,1.6
condition,0.3,0.2,1.8
when,0.1,0.1,1.3
only,0.2,0.1,1.1
once,0.1,0.1,1.2
until,0.2,0.1,1.4
after,0.1,0.2,1.1
if,0.1,0.1,1.2
below,0.1,0.6,1.2
under,0.1,0.5,1.1
stable,0.1,0.6,1.3
replaced,0.2,0.3,1.2
cleared,0.3,0.3,1.3
inspection,0.2,0.8,1.1
)";

inline std::string read_text_file(const std::filesystem::path& p, const char* what) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw PluginError(p.string() + ": cannot open " + what);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Splits one CSV line without quotes support beyond plain fields (the lexicon's format).
inline std::vector<std::string> split_commas(std::string_view line) {
  std::vector<std::string> v;
  std::size_t i = 0;
  while (true) {
    const std::size_t j = line.find(',', i);
    v.emplace_back(line.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return v;
}

/// The folder's tokenizer (ModelTokenizer::load), read once for as long as this plugin stays
/// loaded: the Python module's headsep.model(DIR) keeps it loaded, so its runs do not read
/// tokenizer.json again (a CLI run reads it once, as before). Keyed by the folder, max_tokens and
/// the size and modification time of every file load reads: a changed file is read anew. The last
/// few folders are kept.
inline std::shared_ptr<const headsep::ModelTokenizer> cached_tokenizer(const std::string& dir, std::int64_t max_tokens) {
  std::string key = dir + '\n' + std::to_string(max_tokens);
  for (const char* f : {"config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json"}) {
    std::error_code ec;
    const auto p = std::filesystem::path(dir) / f;
    const auto size = std::filesystem::file_size(p, ec);
    const auto time = ec ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(p, ec);
    key += '\n' + std::string(f) + (ec ? std::string(" -") : " " + std::to_string(size) + " " +
                                                                 std::to_string(time.time_since_epoch().count()));
  }
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::shared_ptr<const headsep::ModelTokenizer>>> kept;  // newest last
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [k, t] : kept)
      if (k == key) return t;
  }
  auto t = std::make_shared<const headsep::ModelTokenizer>(headsep::ModelTokenizer::load(dir, max_tokens));
  std::lock_guard<std::mutex> lock(mu);
  if (kept.size() == 4) kept.erase(kept.begin());
  kept.emplace_back(std::move(key), t);
  return t;
}

class Tokenizer {
 public:
  /// The model folder's tokenizer (headsep/model_tokenizer.hpp: vocab.txt checked against the
  /// model, truncation at the folder's length); max_tokens 0 = that length.
  Tokenizer(const std::string& model_dir, std::int64_t max_tokens, const std::string& lexicon_file) {
    if (model_dir.empty())
      throw PluginError("parameter 'model' is empty: give the model folder holding vocab.txt (headsep run --model DIR passes it)");
    try {
      mt_ = cached_tokenizer(model_dir, max_tokens);
    } catch (const headsep::Error& e) {
      throw PluginError(e.what());
    }
    load_lexicon(lexicon_file);
  }

  const std::vector<std::string>& axes() const noexcept { return axes_; }
  /// Features: token_id, text_status, the lexicon's axes, then the token classes'.
  std::vector<std::string> features() const {
    std::vector<std::string> f{"token_id", "text_status"};
    f.insert(f.end(), axes_.begin(), axes_.end());
    for (auto n : headsep::kTokenAxes) f.emplace_back(n);
    return f;
  }
  /// The model's tokenizer (WordPiece or BPE, headsep/tokenizer.hpp).
  const headsep::TextTokenizer& tokenizer() const noexcept { return *mt_->tokenizer; }

  /// Tokenizes; throws headsep::Error on invalid UTF-8 (the caller adds file and line).
  void encode(std::string_view text, headsep::Encoding& e) const { mt_->tokenizer->encode(text, e); }

  /// Axis values of the word token i came from (nullptr: not in the lexicon / special token).
  const double* values(const headsep::Encoding& e, std::size_t i) const {
    if (e.word[i] == headsep::Encoding::kNoWord) return nullptr;
    auto it = lexicon_.find(e.words[e.word[i]]);
    return it == lexicon_.end() ? nullptr : it->second.data();
  }

 private:
  void load_lexicon(const std::string& file) {
    const std::string bytes = file.empty() ? std::string(kOpsLexicon) : read_text_file(file, "the lexicon");
    const std::string name = file.empty() ? std::string("(built-in ops lexicon)") : file;
    std::size_t pos = 0, line_no = 0;
    headsep::Encoding e;
    while (pos < bytes.size()) {
      std::size_t end = bytes.find('\n', pos);
      if (end == std::string::npos) end = bytes.size();
      std::string_view line(bytes.data() + pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line_no == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
      if (line.empty()) continue;
      const auto f = split_commas(line);
      const std::string where = name + ":" + std::to_string(line_no) + ": ";
      if (axes_.empty()) {
        if (f.size() < 2 || f[0] != "word")
          throw PluginError(where + "the lexicon's header must be 'word,AXIS1,AXIS2,...'");
        axes_.assign(f.begin() + 1, f.end());
        for (const auto& a : axes_) {
          bool token_axis = false;
          for (auto n : headsep::kTokenAxes) token_axis = token_axis || a == n;
          if (a.empty() || a == "token_id" || a == "text_status" || token_axis)
            throw PluginError(where + "axis names must be non-empty and not 'token_id', 'text_status' or a token-class "
                              "axis (position, punctuation, word_start)");
        }
        continue;
      }
      if (f.size() != axes_.size() + 1)
        throw PluginError(where + std::to_string(f.size()) + " fields, expected " + std::to_string(axes_.size() + 1));
      try {
        encode(f[0], e);
      } catch (const headsep::Error& err) {
        throw PluginError(where + "word: " + err.what());
      }
      if (e.words.size() != 1) throw PluginError(where + "'" + f[0] + "' is not one word after tokenization");
      std::vector<double> v;
      for (std::size_t k = 1; k < f.size(); ++k) {
        std::size_t used = 0;
        double x = 0;
        try {
          x = std::stod(f[k], &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != f[k].size() || f[k].empty() || !std::isfinite(x))
          throw PluginError(where + "column '" + axes_[k - 1] + "': '" + f[k] + "' is not a finite number");
        v.push_back(x);
      }
      lexicon_[e.words[0]] = std::move(v);
    }
    if (axes_.empty()) throw PluginError(name + ": the lexicon is empty (expected a header 'word,AXIS1,...')");
  }

  std::shared_ptr<const headsep::ModelTokenizer> mt_;
  std::vector<std::string> axes_;
  std::map<std::string, std::vector<double>> lexicon_;
};

/// One chunk's tokenized reports, written out once every report is known (offsets come first).
/// Feature text_status, on every token of a report: 0, kTruncated (the text was cut at the
/// truncation length) or kEmpty (no token of a word: [CLS] [SEP] only, or for BPE the template's,
/// whitespace and special tokens only: an empty or whitespace-only text).
/// Why a text without any token is refused (issue 52): a model cannot run a zero-length sequence,
/// and measuring it as something else would invent numbers. Reports keep their text otherwise.
inline constexpr const char* kNoTokenReason =
    "the text has no token to measure: it is empty or whitespace-only and this model's tokenizer adds no special "
    "token (transformers cannot run a zero-length sequence either); remove the report or give it text";

struct ChunkBuilder {
  static constexpr double kTruncated = 1, kEmpty = 2;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> ids;
  std::vector<double> status;             // text_status per token
  std::vector<std::vector<double>> axis;  // [axis][token]: the lexicon's, then the token classes'
  std::vector<std::string> tokens;        // names (when asked)
  headsep::Encoding enc;

  static constexpr std::size_t kTokenAxisCount = std::size(headsep::kTokenAxes);
  void reset(std::size_t lexicon_axes) {
    offsets.assign(1, 0);
    ids.clear();
    status.clear();
    axis.assign(lexicon_axes + kTokenAxisCount, {});
    tokens.clear();
  }
  /// Appends the encoding just made in `enc`.
  void add(const Tokenizer& tk, bool names) {
    // Empty: no token of a word (WordPiece: [CLS] [SEP] only; BPE: the template's, whitespace, specials).
    const bool empty = std::all_of(enc.word.begin(), enc.word.end(), [](std::uint32_t w) { return w == headsep::Encoding::kNoWord; });
    const double st = enc.truncated ? kTruncated : empty ? kEmpty : 0.0;  // (max_tokens=2: truncated)
    const std::size_t n = enc.ids.size(), lex = axis.size() - kTokenAxisCount;
    for (std::size_t i = 0; i < n; ++i) {
      ids.push_back(enc.ids[i]);
      status.push_back(st);
      const double* v = tk.values(enc, i);
      for (std::size_t a = 0; a < lex; ++a) axis[a].push_back(v ? v[a] : 0.0);
      const std::uint32_t w = enc.word[i];
      const bool word = w != headsep::Encoding::kNoWord;
      // f32 as the model reads it: j / (n - 1) rounded once.
      axis[lex].push_back(n > 1 ? double(static_cast<float>(double(i) / double(n - 1))) : 0.0);
      axis[lex + 1].push_back(word && headsep::punctuation_word(enc.words[w]) ? 1.0 : 0.0);
      axis[lex + 2].push_back(word && (i == 0 || enc.word[i - 1] != w) ? 1.0 : 0.0);
      if (names) tokens.push_back(tk.tokenizer().token(enc.ids[i]));
    }
    offsets.push_back(ids.size());
  }
  std::size_t reports() const noexcept { return offsets.size() - 1; }
  void write(headsep::sdk::ChunkWriter& out) const {
    const std::uint64_t n = reports(), t = ids.size();
    auto off = out.token_offsets(n);
    std::copy(offsets.begin(), offsets.end(), off.begin());
    auto id = out.feature(0, t);
    for (std::size_t i = 0; i < t; ++i) id[i] = ids[i];
    auto st = out.feature(1, t);
    std::copy(status.begin(), status.end(), st.begin());
    for (std::size_t a = 0; a < axis.size(); ++a) {
      auto col = out.feature(static_cast<std::uint32_t>(a + 2), t);
      std::copy(axis[a].begin(), axis[a].end(), col.begin());
    }
    for (const auto& s : tokens) out.token_name(s);
  }
};

}  // namespace headsep_text
