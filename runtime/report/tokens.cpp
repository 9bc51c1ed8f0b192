// Tokens as a reader sees them (docs/REPORTS.md, "Tokens as text"). A tokenizer's pieces are
// vocabulary strings, not text: GPT-2's byte-level BPE writes a leading space as 'Ġ' (each byte as
// one of 256 printable code points, `bytes_to_unicode`), SentencePiece writes it as '▁', and byte
// fallback spells a character it has no piece for as one "<0xNN>" token per UTF-8 byte. The report
// shows the text instead, spaces as a visible '␣', and keeps the raw piece for hover.
//
// The report does not know which tokenizer made its tokens, so the byte-level reading is chosen
// per report: only when every token is spelled in the byte-level alphabet and one of them uses a
// code point above U+00FF (Ġ, Ċ, ...), which WordPiece vocabularies and Korean text never do.
// Hangul that BERT's uncased normalizer split into conjoining jamo is composed back per syllable.
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "report/figures.hpp"
#include "support/text_util.hpp"

namespace headsep::report {
namespace {

// The code points of a valid UTF-8 string (invalid input: nullopt).
std::optional<std::vector<std::uint32_t>> code_points(const std::string& s) {
  if (find_invalid_utf8(s)) return std::nullopt;
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    std::uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

// GPT-2's bytes_to_unicode, inverted: the byte a code point of the byte-level alphabet stands for.
// Printable bytes (!..~, ¡..¬, ®..ÿ) stand for themselves; the 68 others are U+0100.. in order.
std::optional<unsigned char> byte_of(std::uint32_t cp) {
  auto printable = [](std::uint32_t b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; };
  if (cp < 256) return printable(cp) ? std::optional<unsigned char>(static_cast<unsigned char>(cp)) : std::nullopt;
  std::uint32_t n = 256;
  for (std::uint32_t b = 0; b < 256; ++b)
    if (!printable(b) && n++ == cp) return static_cast<unsigned char>(b);
  return std::nullopt;
}

bool byte_level(const std::vector<std::string>& raw) {
  bool high = false;
  for (const auto& t : raw) {
    const auto cps = code_points(t);
    if (!cps) return false;
    for (std::uint32_t cp : *cps) {
      if (!byte_of(cp)) return false;
      high = high || cp >= 256;
    }
  }
  return high;
}

// "<0xNN>": SentencePiece's byte fallback.
std::optional<unsigned char> fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

// Valid UTF-8 text with its spaces and controls made visible; invalid bytes as ⟨NN⟩.
std::string visible(const std::string& bytes) {
  std::string o;
  char hex[16];
  for (std::size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      if (c == ' ') o += "␣";
      else if (c == '\n') o += "↵";
      else if (c == '\t') o += "⇥";
      else if (c < 0x20 || c == 0x7F) std::snprintf(hex, sizeof hex, "⟨%02X⟩", c), o += hex;
      else o += char(c);
      ++i;
      continue;
    }
    const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > 1 && i + len <= bytes.size() && !find_invalid_utf8(bytes.substr(i, len))) {
      o += bytes.substr(i, len);
      i += len;
    } else {
      std::snprintf(hex, sizeof hex, "⟨%02X⟩", c), o += hex;
      ++i;
    }
  }
  return o;
}

// The one conjoining Hangul jamo (U+1100..U+11FF) that t spells after `skip` bytes, if it is that.
std::optional<std::uint32_t> jamo(const std::string& t, std::size_t skip) {
  if (t.size() <= skip) return std::nullopt;
  const auto cps = code_points(t.substr(skip));
  if (!cps || cps->size() != 1 || (*cps)[0] < 0x1100 || (*cps)[0] > 0x11FF) return std::nullopt;
  return (*cps)[0];
}

bool leading_consonant(std::uint32_t cp) { return cp <= 0x115F; }

std::string nfc(const std::string& s) {
  utf8proc_uint8_t* c = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  if (!c) return s;
  std::string out(reinterpret_cast<const char*>(c));
  std::free(c);
  return out;
}

// BERT's uncased WordPiece strips accents by NFD, which spells a Hangul syllable as conjoining
// jamo, one token each (압 -> ᄋ ##ᅡ ##ᆸ). A leading consonant's token and the "##" vowel and final
// tokens after it: [first, end) of the syllable, or end = first when raw[first] begins none.
std::size_t syllable_end(const std::vector<std::string>& raw, std::size_t first) {
  const std::size_t skip = raw[first].rfind("##", 0) == 0 ? 2 : 0;
  const auto lead = jamo(raw[first], skip);
  if (!lead || !leading_consonant(*lead)) return first;
  std::size_t j = first + 1;
  while (j < raw.size() && raw[j].rfind("##", 0) == 0 && jamo(raw[j], 2) && !leading_consonant(*jamo(raw[j], 2))) ++j;
  return j;
}

}  // namespace

std::vector<std::string> display_tokens(const std::vector<std::string>& raw) {
  // Each token's bytes, when it spells bytes (byte-level, byte fallback); nullopt: a text piece.
  const bool level = byte_level(raw);
  std::vector<std::optional<std::string>> bytes(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (const auto b = fallback_byte(raw[i])) {
      bytes[i] = std::string(1, char(*b));
    } else if (level) {
      std::string s;
      const auto cps = code_points(raw[i]);  // valid: byte_level() read every token
      for (std::uint32_t cp : *cps) s += char(*byte_of(cp));
      bytes[i] = s;
    }
  }
  std::vector<std::string> out(raw.size());
  for (std::size_t i = 0; i < raw.size();) {
    if (const std::size_t end = bytes[i] ? i : syllable_end(raw, i); end > i + 1) {  // jamo: the syllable
      const bool cont = raw[i].rfind("##", 0) == 0;
      std::string jamos;
      for (std::size_t k = i; k < end; ++k) jamos += raw[k].substr(k == i && !cont ? 0 : 2);
      const std::string syllable = nfc(jamos);
      out[i] = (cont ? "##" : "") + syllable;
      for (std::size_t k = i + 1; k < end; ++k) out[k] = "(" + syllable + ")";
      i = end;
      continue;
    }
    if (!bytes[i]) {  // a text piece: SentencePiece's '▁' is a space
      std::string s;
      for (std::size_t at = 0, next; at < raw[i].size(); at = next + 3) {
        next = raw[i].find("▁", at);
        s += raw[i].substr(at, next == std::string::npos ? std::string::npos : next - at);
        if (next == std::string::npos) break;
        s += ' ';
      }
      out[i] = s == raw[i] ? s : visible(s);
      ++i;
      continue;
    }
    // A character split over several tokens (byte fallback, or byte-level BPE of CJK text): the
    // shortest run of byte tokens, at most 4, that forms UTF-8; its first token shows the text,
    // the others "(text)". A run that never forms UTF-8 shows its bytes as ⟨NN⟩.
    std::string run = *bytes[i];
    std::size_t j = i + 1;
    while (find_invalid_utf8(run) && j < raw.size() && j < i + 4 && bytes[j]) run += *bytes[j++];
    if (find_invalid_utf8(run)) {
      out[i] = visible(*bytes[i]);
      ++i;
      continue;
    }
    out[i] = visible(run);
    for (std::size_t k = i + 1; k < j; ++k) out[k] = "(" + out[i] + ")";
    i = j;
  }
  return out;
}

}  // namespace headsep::report
