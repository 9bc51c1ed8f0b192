// Reading Hugging Face tokenizer.json (private to runtime/model): the parse with file:line:column
// errors, BERT's WordPiece pipeline checked component by component, the vocabulary by id. The
// public entry is headsep/tokenizer.hpp's tokenizer_from_json; ModelTokenizer uses these too.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/wordpiece.hpp"

namespace headsep::tokjson {

/// Parses the file's text; malformed JSON -> Error "NAME:LINE:COL: not valid JSON (...)"; a
/// document that is not an object -> Error.
nlohmann::json parse(std::string_view bytes, const std::string& name);

/// model.type ("WordPiece", "BPE"); anything else refused by name.
std::string model_type(const nlohmann::json& t, const std::string& name);

/// Checks BERT's pipeline (BertNormalizer, BertPreTokenizer, WordPiece "##"/[UNK], a [CLS] A [SEP]
/// post-processor) and returns the options it sets; refusals name the JSON path.
WordPieceOptions bert_pipeline(const nlohmann::json& t, const std::string& name);

/// model.vocab as tokens by id (ids 0..N-1, each once), else Error naming the path.
std::vector<std::string> vocab_by_id(const nlohmann::json& t, const std::string& name);

/// WordPiece's added tokens: each an entry of `wp` at the same id, flags false; their contents.
std::vector<std::string> wordpiece_added(const nlohmann::json& t, const std::string& name, const WordPiece& wp,
                                         const std::string& vocab_name);

}  // namespace headsep::tokjson
