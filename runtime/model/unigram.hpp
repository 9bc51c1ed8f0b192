// The Unigram model of Hugging Face `tokenizers` (models/unigram): one pre-tokenized word -> the
// pieces of the best segmentation, by Viterbi over the vocabulary's log-probability scores, as
// its encode_optimized: positions left to right, candidates at a position in order of length
// (a byte trie), a candidate replacing the best so far only when strictly better (so ties keep
// the shorter, earlier one). A character no piece spells is an unk node scored min score - 10;
// consecutive unk nodes fuse into one string; a result string not in the vocabulary becomes its
// <0xXX> tokens (byte_fallback, when all exist) or unk_id.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/bpe.hpp"

namespace headsep::unigram {

class Model final : public bpe::WordModel {
 public:
  /// `pieces` by id (non-empty, no piece twice, none empty); unk_id < pieces.size() or -1
  /// (then an unknown character throws at encode, as tokenizers' MissingUnkId). Error naming
  /// `where` otherwise.
  Model(const std::vector<std::pair<std::string, double>>& pieces, std::int64_t unk_id, bool byte_fallback,
        const std::string& where);

  void tokenize(std::string_view word, std::vector<bpe::Piece>& out) const override;
  bool merges_cross(std::string_view marker) const noexcept override;

 private:
  std::uint32_t child(std::uint32_t node, unsigned char b) const noexcept;

  std::vector<double> score_;                     // by id
  std::vector<std::int32_t> node_id_;             // trie node -> the id of the piece ending there, or -1
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<std::string> pieces_;               // for merges_cross
  std::int64_t unk_ = -1;
  bool byte_fallback_ = false;
  double unk_score_ = 0;
  std::int64_t hex_id_[256];                      // the id of <0xXX>, or -1
};

}  // namespace headsep::unigram
