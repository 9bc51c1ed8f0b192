// The Unigram model (unigram.hpp). The trie walks bytes, so a candidate list at a position comes
// out shortest first, the order tokenizers' trie yields them; scores add in f64 as there.
#include "model/unigram.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep::unigram {

namespace {
constexpr std::uint32_t kNoNode = ~0u;
constexpr double kUnkPenalty = 10.0;  // tokenizers' K_UNK_PENALTY
}  // namespace

Model::Model(const std::vector<std::pair<std::string, double>>& pieces, std::int64_t unk_id, bool byte_fallback,
             const std::string& where)
    : unk_(unk_id), byte_fallback_(byte_fallback) {
  if (pieces.empty()) throw Error(where + " is empty");
  if (unk_id >= static_cast<std::int64_t>(pieces.size()))
    throw Error(where + ": unk_id " + std::to_string(unk_id) + " is past the vocabulary (" + std::to_string(pieces.size()) + " pieces)");
  std::fill(std::begin(hex_id_), std::end(hex_id_), -1);
  node_id_.push_back(-1);
  double min_score = std::numeric_limits<double>::infinity();
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    const auto& [p, s] = pieces[id];
    if (p.empty()) throw Error(where + "[" + std::to_string(id) + "]: an empty piece");
    std::uint32_t node = 0;
    for (const char c : p) {
      const std::uint64_t key = std::uint64_t(node) << 8 | static_cast<unsigned char>(c);
      const auto [it, fresh] = edges_.emplace(key, static_cast<std::uint32_t>(node_id_.size()));
      if (fresh) node_id_.push_back(-1);
      node = it->second;
    }
    if (node_id_[node] >= 0)
      throw Error(where + "[" + std::to_string(id) + "]: piece '" + printable(p, 40) + "' repeats model.vocab[" +
                  std::to_string(node_id_[node]) + "]");
    node_id_[node] = static_cast<std::int32_t>(id);
    min_score = std::min(min_score, s);
    score_.push_back(s);
    pieces_.push_back(p);
    unsigned b;
    char tail;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X%c", &b, &tail) == 2 && tail == '>' &&
        std::isxdigit(static_cast<unsigned char>(p[3])) && std::isxdigit(static_cast<unsigned char>(p[4])) &&
        !std::islower(static_cast<unsigned char>(p[3])) && !std::islower(static_cast<unsigned char>(p[4])))
      hex_id_[b] = static_cast<std::int64_t>(id);  // tokenizers looks up format!("<0x{:02X}>")
  }
  unk_score_ = min_score - kUnkPenalty;
}

std::uint32_t Model::child(std::uint32_t node, unsigned char b) const noexcept {
  const auto it = edges_.find(std::uint64_t(node) << 8 | b);
  return it == edges_.end() ? kNoNode : it->second;
}

bool Model::merges_cross(std::string_view marker) const noexcept {
  if (marker.empty()) return false;
  for (const std::string& p : pieces_)
    for (std::size_t i = p.find(marker, 1); i != std::string::npos; i = p.find(marker, i + 1))
      if (i < marker.size() || p.compare(i - marker.size(), marker.size(), marker) != 0) return true;
  return false;
}

void Model::tokenize(std::string_view w, std::vector<bpe::Piece>& out) const {
  struct Best {
    double score = 0;
    std::uint32_t start = 0;
    std::int64_t id = -1;  // -1: no path ends here yet
  };
  thread_local std::vector<Best> best;
  const std::size_t n = w.size();
  best.assign(n + 1, Best{});
  const auto* b = reinterpret_cast<const unsigned char*>(w.data());
  auto offer = [&](std::size_t end, std::size_t start, std::int64_t id, double score) {
    Best& t = best[end];
    if (t.id < 0 || score > t.score) t = {score, static_cast<std::uint32_t>(start), id};
  };
  for (std::size_t at = 0; at < n;) {
    const double here = best[at].score;
    const std::size_t ch = std::min(bpe::utf8_len(b[at]), n - at);
    bool single = false;
    std::uint32_t node = 0;
    for (std::size_t k = at; k < n; ++k) {
      node = child(node, b[k]);
      if (node == kNoNode) break;
      if (const std::int32_t id = node_id_[node]; id >= 0) {
        offer(k + 1, at, id, score_[static_cast<std::size_t>(id)] + here);
        single |= k + 1 - at == ch;
      }
    }
    if (!single) {
      if (unk_ < 0) throw Error("a character not in the Unigram vocabulary, and the model has no unk_id");
      offer(at + ch, at, unk_, unk_score_ + here);
    }
    at += ch;
  }
  // Back from the end: unk nodes in a row fuse into one string, as fuse_unk (always on) does.
  thread_local std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;  // [start, end) of each result
  thread_local std::vector<std::int64_t> ids;
  spans.clear(), ids.clear();
  for (std::size_t end = n; end > 0;) {
    const Best& t = best[end];
    if (unk_ >= 0 && t.id == unk_ && !ids.empty() && ids.back() == unk_ && spans.back().first == end)
      spans.back().first = t.start;
    else
      spans.emplace_back(t.start, static_cast<std::uint32_t>(end)), ids.push_back(t.id);
    end = t.start;
  }
  for (std::size_t k = spans.size(); k-- > 0;) {
    const auto [s, e] = spans[k];
    if (ids[k] != unk_ || e - s == 0) {
      out.push_back({static_cast<std::uint32_t>(ids[k]), s});
      continue;
    }
    // An unk string (fused or not) gets the id of a piece that spells it, else its bytes, else unk.
    std::uint32_t node = 0;
    for (std::uint32_t i = s; i < e && node != kNoNode; ++i) node = child(node, b[i]);
    if (node != kNoNode && node_id_[node] >= 0) {
      out.push_back({static_cast<std::uint32_t>(node_id_[node]), s});
      continue;
    }
    bool bytes = byte_fallback_;
    for (std::uint32_t i = s; i < e && bytes; ++i) bytes = hex_id_[b[i]] >= 0;
    if (bytes)
      for (std::uint32_t i = s; i < e; ++i) out.push_back({static_cast<std::uint32_t>(hex_id_[b[i]]), s});
    else
      out.push_back({static_cast<std::uint32_t>(unk_), s});
  }
}

}  // namespace headsep::unigram
