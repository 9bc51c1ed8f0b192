// BPE merges (bpe.hpp). The merge table is open addressing on the pair of ids (one probe in the
// common case); a word's symbols form a linked list, and a binary heap ordered by (rank, position)
// picks the next merge, skipping entries made stale by earlier merges — exactly the loop of
// tokenizers' word.rs, so ties resolve as there. Each thread caches words it has seen (English
// repeats words: most lookups skip the merge loop).
#include "model/bpe.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>

#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep::bpe {
namespace {

constexpr std::uint32_t make_byte_char(int b) noexcept {
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return static_cast<std::uint32_t>(b);
  int n = 0;
  for (int c = 0; c < b; ++c)
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) ++n;
  return 256u + static_cast<std::uint32_t>(n);
}

std::string utf8_of(std::uint32_t c) {
  std::string s;
  append_utf8(s, c);
  return s;
}


std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

std::atomic<std::uint64_t> g_next_uid{1};

/// Per-thread cache: word -> pieces, for one model at a time (cleared when another model asks or
/// when it grows past kMaxEntries; results never depend on it).
struct Cache {
  static constexpr std::size_t kMaxEntries = 1 << 16, kMaxWord = 256;
  std::uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<Piece>, StringHash, std::equal_to<>> map;
};
thread_local Cache t_cache;

}  // namespace

const std::uint32_t kByteChar[256] = {
#define HS_B(i) make_byte_char(i)
#define HS_B8(i) HS_B(i), HS_B(i + 1), HS_B(i + 2), HS_B(i + 3), HS_B(i + 4), HS_B(i + 5), HS_B(i + 6), HS_B(i + 7)
#define HS_B64(i) HS_B8(i), HS_B8(i + 8), HS_B8(i + 16), HS_B8(i + 24), HS_B8(i + 32), HS_B8(i + 40), HS_B8(i + 48), HS_B8(i + 56)
    HS_B64(0), HS_B64(64), HS_B64(128), HS_B64(192)
#undef HS_B64
#undef HS_B8
#undef HS_B
};

Model::Model(const Vocab& vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
             const std::string& where)
    : options_(options), vocab_(&vocab), uid_(g_next_uid.fetch_add(1)) {
  std::size_t cap = 16;
  while (cap < merges.size() * 2 + 2) cap <<= 1;
  merges_.assign(cap, MergeSlot{});
  mask_ = cap - 1;
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const auto ia = vocab.find(a), ib = vocab.find(b), ic = vocab.find(a + b);
    const std::string at = where + "[" + std::to_string(r) + "]";
    if (ia == vocab.end()) throw Error(at + ": '" + a.substr(0, 40) + "' is not in the vocabulary");
    if (ib == vocab.end()) throw Error(at + ": '" + b.substr(0, 40) + "' is not in the vocabulary");
    if (ic == vocab.end()) throw Error(at + ": the merged token '" + (a + b).substr(0, 40) + "' is not in the vocabulary");
    const std::uint64_t key = (std::uint64_t(ia->second) << 32) | ib->second;
    for (std::uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      MergeSlot& s = merges_[i];
      if (s.key == ~0ull) {
        s = {key, static_cast<std::uint32_t>(r), ic->second};
        break;
      }
      if (s.key == key) {  // a repeated merge takes its last rank, as tokenizers' map of merges
        s.rank = static_cast<std::uint32_t>(r);
        break;
      }
    }
    merged_tokens_.push_back(a + b);
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    const auto it = vocab.find(hex);
    hex_id_[b] = it == vocab.end() ? -1 : std::int64_t(it->second);
    const auto ic = vocab.find(utf8_of(kByteChar[b]));
    byte_id_[b] = ic == vocab.end() ? -1 : std::int64_t(ic->second);
  }
  if (!options.byte_level)
    for (const auto& [t, id] : vocab) {
      const auto* s = reinterpret_cast<const unsigned char*>(t.data());
      if (!t.empty() && utf8_len(s[0]) == t.size()) char_id_[decode_at(s, t.size())] = id;
    }
}

const Model::MergeSlot* Model::merge_of(std::uint32_t a, std::uint32_t b) const noexcept {
  const std::uint64_t key = (std::uint64_t(a) << 32) | b;
  for (std::uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == ~0ull) return nullptr;
  }
}

bool Model::merges_cross(std::string_view marker) const noexcept {
  for (const auto& t : merged_tokens_)
    for (std::size_t p = t.find(marker, 1); p != std::string::npos; p = t.find(marker, p + 1))
      if (!(p >= marker.size() && t.compare(p - marker.size(), marker.size(), marker) == 0)) return true;
  return false;
}

/// The word's first symbols (id, byte offset) and their byte lengths, as tokenizers' merge_word:
/// each character (byte-level: each byte, as its character of GPT-2's alphabet) is its token, else
/// with byte_fallback the <0xXX> tokens of its UTF-8 (all of them, or none), else unk, consecutive
/// unks fused into one with fuse_unk.
void Model::initial_symbols(std::string_view word, std::vector<Piece>& syms, std::vector<std::uint32_t>& lens) const {
  const auto* s = reinterpret_cast<const unsigned char*>(word.data());
  const std::size_t n = word.size();
  std::int64_t unk_start = -1;  // a pending unk (fused over consecutive unknown characters)
  std::uint32_t unk_len = 0;
  auto flush_unk = [&] {
    if (unk_start >= 0) syms.push_back({static_cast<std::uint32_t>(options_.unk), static_cast<std::uint32_t>(unk_start)}), lens.push_back(unk_len);
    unk_start = -1;
  };
  unsigned char utf8[4];
  for (std::size_t i = 0; i < n;) {
    const std::size_t len = options_.byte_level ? 1 : std::min(utf8_len(s[i]), n - i);
    std::int64_t id = -1;
    const unsigned char* bytes = s + i;  // the character's UTF-8, for byte fallback
    std::size_t nbytes = len;
    if (options_.byte_level) {
      id = byte_id_[s[i]];
      const std::uint32_t c = kByteChar[s[i]];  // (< 0x800: one or two bytes)
      if (c < 0x80) utf8[0] = static_cast<unsigned char>(c), nbytes = 1;
      else utf8[0] = static_cast<unsigned char>(0xC0 | (c >> 6)), utf8[1] = static_cast<unsigned char>(0x80 | (c & 0x3F)), nbytes = 2;
      bytes = utf8;
    } else if (const auto it = char_id_.find(decode_at(s + i, len)); it != char_id_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      flush_unk();
      syms.push_back({static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(i)}), lens.push_back(static_cast<std::uint32_t>(len));
    } else {
      bool done = false;
      if (options_.byte_fallback) {
        done = true;
        for (std::size_t k = 0; k < nbytes; ++k) done = done && hex_id_[bytes[k]] >= 0;
        if (done)  // (a pending unk stays pending, after the bytes: tokenizers' order)
          for (std::size_t k = 0; k < nbytes; ++k)  // (byte-level: each at the byte's offset)
            syms.push_back({static_cast<std::uint32_t>(hex_id_[bytes[k]]), static_cast<std::uint32_t>(i + (options_.byte_level ? 0 : k))}),
                lens.push_back(options_.byte_level && k ? 0 : 1);
      }
      if (!done && options_.unk >= 0) {
        if (unk_start >= 0 && options_.fuse_unk) {
          unk_len += static_cast<std::uint32_t>(len);
        } else {
          flush_unk();
          unk_start = static_cast<std::int64_t>(i), unk_len = static_cast<std::uint32_t>(len);
        }
      }
    }
    i += len;
  }
  flush_unk();
}

void Model::tokenize_uncached(std::string_view word, std::vector<Piece>& out) const {
  if (options_.ignore_merges) {
    std::string key;
    if (options_.byte_level)
      for (unsigned char c : word) key += utf8_of(kByteChar[c]);
    const auto it = options_.byte_level ? vocab_->find(key) : vocab_->find(word);
    if (it != vocab_->end()) return out.push_back({it->second, 0});
  }
  struct Sym {
    std::uint32_t id, start;
    std::int32_t prev, next;
    bool live;
  };
  thread_local std::vector<Piece> init;
  thread_local std::vector<std::uint32_t> lens;
  thread_local std::vector<Sym> sym;
  init.clear(), lens.clear(), sym.clear();
  initial_symbols(word, init, lens);
  const auto n = static_cast<std::int32_t>(init.size());
  for (std::int32_t i = 0; i < n; ++i) sym.push_back({init[i].id, init[i].start, i - 1, i + 1 < n ? i + 1 : -1, true});
  struct Cand {
    std::uint32_t rank;
    std::int32_t pos;
    std::uint32_t id;
    bool operator>(const Cand& o) const noexcept { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Cand> heap;  // a min-heap on (rank, position)
  heap.clear();
  const auto push = [](const Cand& c) { heap.push_back(c), std::push_heap(heap.begin(), heap.end(), std::greater<>{}); };
  for (std::int32_t i = 0; i + 1 < n; ++i)
    if (const MergeSlot* m = merge_of(sym[i].id, sym[i + 1].id)) push({m->rank, i, m->id});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Cand top = heap.back();
    heap.pop_back();
    Sym& cur = sym[top.pos];
    if (!cur.live || cur.next < 0) continue;
    const Sym& right = sym[cur.next];
    const MergeSlot* m = merge_of(cur.id, right.id);
    if (!m || m->id != top.id) continue;  // stale: the pair changed since it was queued
    cur.id = top.id;
    sym[cur.next].live = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[cur.next].prev = top.pos;
    if (cur.prev >= 0)
      if (const MergeSlot* p = merge_of(sym[cur.prev].id, cur.id)) push({p->rank, cur.prev, p->id});
    if (cur.next >= 0)
      if (const MergeSlot* q = merge_of(cur.id, sym[cur.next].id)) push({q->rank, top.pos, q->id});
  }
  for (std::int32_t i = 0; i < n; ++i)
    if (sym[i].live) out.push_back({sym[i].id, sym[i].start});
}

void Model::tokenize(std::string_view word, std::vector<Piece>& out) const {
  if (word.size() > Cache::kMaxWord) return tokenize_uncached(word, out);
  Cache& c = t_cache;
  if (c.owner != uid_ || c.map.size() >= Cache::kMaxEntries) c.map.clear(), c.owner = uid_;
  if (const auto it = c.map.find(word); it != c.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const std::size_t first = out.size();
  tokenize_uncached(word, out);
  c.map.emplace(std::string(word), std::vector<Piece>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
}

}  // namespace headsep::bpe
