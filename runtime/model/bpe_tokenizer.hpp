// The BPE and Unigram tokenizer pipeline of a tokenizer.json, as Hugging Face `tokenizers` runs it: added
// tokens split out of the raw text, normalizer, added tokens matched in the normalized text,
// pre-tokenizer (ByteLevel or Metaspace), BPE (bpe.hpp) or Unigram (unigram.hpp) model, truncation, post-processor
// template. tokenizer_json.cpp reads the file into a BpeSpec; this builds the tokenizer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headsep/tokenizer.hpp"
#include "model/bpe.hpp"
#include "model/bpe_split.hpp"
#include "model/precompiled.hpp"

namespace headsep::bpe {

struct AddedToken {
  std::string content;
  std::uint32_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

/// One normalizer step: Prepend(text), Replace(pattern string -> content), Replace(Regex " {2,}"
/// -> content: runs of two or more spaces), a Unicode normalization form (utf8proc), Lowercase or
/// SentencePiece's Precompiled charsmap.
struct NormStep {
  enum Kind { kPrepend, kReplace, kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplaceSpaceRuns, kPrecompiled } kind;
  std::string pattern, content;
  std::shared_ptr<const Precompiled> charsmap = {};  ///< kPrecompiled
};

struct PreTokenizer {
  enum Kind { kNone, kByteLevel, kMetaspace } kind = kNone;
  bool add_prefix_space = false;  ///< ByteLevel
  SplitRegex regex = SplitRegex::kGpt2;  ///< ByteLevel: how text is cut before (GPT-2's regex, a Split's, none)
  std::string replacement;        ///< Metaspace (UTF-8 of one character)
  enum Prepend { kNever, kFirst, kAlways } prepend = kAlways;  ///< Metaspace
  bool split = true;              ///< Metaspace
};

struct BpeSpec {
  std::string name;                  ///< the file, for messages
  Vocab vocab;                       ///< model.vocab
  std::vector<std::pair<std::string, std::string>> merges;
  Options options;
  std::vector<std::string> tokens;   ///< id -> token, vocabulary and added tokens
  std::vector<NormStep> normalizer;
  PreTokenizer pre;
  std::vector<AddedToken> added;
  std::vector<std::uint32_t> prefix, suffix;  ///< the post-processor's tokens around the text's
  std::uint32_t max_length = 0;               ///< tokens per text, prefix and suffix included
  /// The word model when not BPE from `vocab` and `merges` (Unigram), and its kind() name.
  std::shared_ptr<const WordModel> model = {};
  const char* kind = nullptr;
};

std::unique_ptr<TextTokenizer> make_bpe_tokenizer(BpeSpec spec);

}  // namespace headsep::bpe
