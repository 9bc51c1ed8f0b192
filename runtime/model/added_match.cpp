// Aho–Corasick with leftmost-longest reporting (added_match.hpp). The automaton is the textbook one
// (trie, failure links by breadth-first order, per node the longest pattern ending there); the
// leftmost-longest rule lives in find(): the best match so far is kept while the current state
// could still be the start of a match beginning at or before it (its depth reaches back that far),
// and returned as soon as it cannot.
#include "model/added_match.hpp"

#include <deque>

namespace headsep {
namespace {

std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

}  // namespace

std::uint32_t AddedMatcher::child(std::uint32_t node, unsigned char b) const noexcept {
  if (node == 0) return root_[b];
  if (keys_.empty()) return 0;
  const std::uint64_t key = (std::uint64_t(node) << 8) | b;
  for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == key) return vals_[i];
    if (keys_[i] == ~0ull) return 0;
  }
}

void AddedMatcher::grow() {
  std::vector<std::uint64_t> keys(keys_.empty() ? 1024 : keys_.size() * 2, ~0ull);
  std::vector<std::uint32_t> vals(keys.size());
  const std::size_t mask = keys.size() - 1;
  for (std::size_t k = 0; k < keys_.size(); ++k)
    if (keys_[k] != ~0ull)
      for (std::size_t i = mix(keys_[k]) & mask;; i = (i + 1) & mask)
        if (keys[i] == ~0ull) {
          keys[i] = keys_[k], vals[i] = vals_[k];
          break;
        }
  keys_.swap(keys), vals_.swap(vals), mask_ = mask;
}

std::uint32_t AddedMatcher::add_child(std::uint32_t node, unsigned char b) {
  if (const std::uint32_t c = child(node, b)) return c;
  const auto id = static_cast<std::uint32_t>(nodes_.size());
  nodes_.push_back({0, nodes_[node].depth + 1, kNone, kNone});
  if (node == 0) return root_[b] = id;
  if (2 * (edges_ + 1) > keys_.size()) grow();  // load at most 1/2
  const std::uint64_t key = (std::uint64_t(node) << 8) | b;
  for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_)
    if (keys_[i] == ~0ull) {
      keys_[i] = key, vals_[i] = id, ++edges_;
      return id;
    }
}

AddedMatcher::AddedMatcher(const std::vector<std::string>& patterns) {
  nodes_.push_back({});
  lengths_.resize(patterns.size());
  // (node, byte, child) in insertion order, for the breadth-first pass below.
  std::vector<std::vector<std::pair<unsigned char, std::uint32_t>>> kids(1);
  for (std::uint32_t p = 0; p < patterns.size(); ++p) {
    lengths_[p] = static_cast<std::uint32_t>(patterns[p].size());
    if (patterns[p].empty()) continue;
    std::uint32_t n = 0;
    for (const char ch : patterns[p]) {
      const auto b = static_cast<unsigned char>(ch);
      std::uint32_t c = child(n, b);
      if (!c) {
        c = add_child(n, b);
        kids[n].emplace_back(b, c);
        kids.emplace_back();
      }
      n = c;
    }
    if (nodes_[n].own == kNone) nodes_[n].own = p;  // equal patterns: the first
  }
  std::deque<std::uint32_t> queue;
  for (const auto& [b, c] : kids[0]) queue.push_back(c);  // depth 1: fail to the root
  for (const auto& [b, c] : kids[0]) nodes_[c].out = nodes_[c].own;
  while (!queue.empty()) {
    const std::uint32_t n = queue.front();
    queue.pop_front();
    for (const auto& [b, c] : kids[n]) {
      std::uint32_t f = nodes_[n].fail;
      while (f != 0 && !child(f, b)) f = nodes_[f].fail;
      f = child(f, b);
      nodes_[c].fail = f;
      nodes_[c].out = nodes_[c].own != kNone ? nodes_[c].own : nodes_[f].out;
      queue.push_back(c);
    }
  }
}

std::optional<AddedMatcher::Match> AddedMatcher::find(std::string_view text, std::size_t from) const noexcept {
  if (empty()) return std::nullopt;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::optional<Match> best;
  std::uint32_t state = 0;
  for (std::size_t pos = from; pos < text.size(); ++pos) {
    std::uint32_t next = child(state, s[pos]);
    while (!next && state != 0) state = nodes_[state].fail, next = child(state, s[pos]);
    state = next;
    const std::size_t end = pos + 1;
    // Every match still to come starts at or after end - depth: none can beat one starting earlier.
    if (best && best->start < end - nodes_[state].depth) return best;
    const std::uint32_t o = nodes_[state].out;
    if (o == kNone) continue;
    const std::size_t start = end - lengths_[o];
    if (!best || start < best->start || (start == best->start && end > best->end)) best = Match{start, end, o};
  }
  return best;
}

}  // namespace headsep
