// headsep — the tokenizer a model folder describes: its vocab.txt checked against the model, and
// the normalizer, special tokens and truncation length its tokenizer files give.
//
//   ModelTokenizer t = ModelTokenizer::load("all-minilm-l6-v2/");  // t.truncation.tokens == 128
//   Encoding e;
//   t.wordpiece.encode("Stop decision.", e);
//
// Files read (docs/MODEL.md, "Tokenizer"):
//  - config.json (required): vocab_size (= the rows of the embedding table, which BertModel::load
//    checks) and max_position_embeddings;
//  - vocab.txt (WordPiece, unless tokenizer.json describes it; BPE needs none): one entry per line, each valid UTF-8, no repeats, and as many entries
//    as vocab_size. Fewer entries than rows (a checkpoint whose table is padded) only when the
//    folder's tokenizer.json lists the same vocabulary, entry for entry; more are refused (an
//    extra line shifts every later id);
//  - tokenizer.json (optional; BPE and WordPiece without vocab.txt: headsep/tokenizer.hpp): BPE
//    is read from it alone. A WordPiece one must describe BERT WordPiece (BertNormalizer, BertPreTokenizer,
//    WordPiece with "##" and [UNK], [CLS] A [SEP]); its lowercase / strip_accents, its
//    max_input_chars_per_word, its added tokens (matched whole in raw text), its vocabulary (the
//    same as vocab.txt) and its truncation; anything headsep would tokenize differently is refused
//    by name;
//  - tokenizer_config.json (optional): model_max_length (HF's "no limit" sentinels, >= 1e18,
//    ignored), and do_lower_case / strip_accents when there is no tokenizer.json.
// Truncation length: `max_tokens` when given (2..max_position_embeddings), else tokenizer.json's
// truncation.max_length, else tokenizer_config.json's model_max_length, else
// max_position_embeddings; never more than max_position_embeddings.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "headsep/wordpiece.hpp"

namespace headsep {

/// Tokens per text, [CLS] and [SEP] included, and where that number came from.
struct TruncationLength {
  std::uint32_t tokens = 0;
  /// "tokenizer.json truncation.max_length", "tokenizer_config.json model_max_length",
  /// "config.json max_position_embeddings" or "max_tokens" (given by the user).
  std::string source;
};

struct ModelTokenizer {
  /// The tokenizer to use (WordPiece, byte-level BPE or byte-fallback BPE): tokenizer.json when the
  /// folder has one (a WordPiece one checked against vocab.txt, which then gives the vocabulary),
  /// else vocab.txt. max_length() = truncation.tokens.
  std::shared_ptr<const TextTokenizer> tokenizer;
  WordPiece wordpiece;          ///< the WordPiece one (empty for BPE); options.max_length = truncation.tokens
  TruncationLength truncation;
  std::uint32_t max_positions = 0;  ///< config.json max_position_embeddings
  std::uint32_t vocab_size = 0;     ///< config.json vocab_size: the embedding table's rows

  /// Reads and checks the folder's tokenizer files (above). `max_tokens` 0 = the folder's
  /// truncation length. Throws Error naming the file (and line or field) at fault; UsageError
  /// when max_tokens is out of 2..max_position_embeddings.
  static ModelTokenizer load(const std::filesystem::path& dir, std::int64_t max_tokens = 0);
  /// Only the truncation length (config.json and the tokenizer files' truncation fields, the
  /// vocabulary not read); the same errors for those.
  static TruncationLength truncation_of(const std::filesystem::path& dir, std::int64_t max_tokens = 0);
};

}  // namespace headsep
