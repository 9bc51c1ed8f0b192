#include "model/hf_lowercase.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

#include "model/bpe.hpp"
#include "model/hf_unicode_tables.hpp"
#include "support/text_util.hpp"

namespace headsep::hf {

std::int32_t lowercase(std::int32_t c, std::int32_t (&l)[3]) noexcept {
  const auto* it = std::lower_bound(std::begin(kLower), std::end(kLower), c,
                                    [](const Mapping& m, std::int32_t v) { return m.cp < v; });
  if (it != std::end(kLower) && it->cp == c) {
    std::int32_t n = 0;
    while (n < 3 && it->to[n]) l[n] = it->to[n], ++n;
    return n;
  }
  l[0] = utf8proc_tolower(c);
  return 1;
}

void lowercase_utf8(std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  if (std::all_of(b, b + s.size(), [](unsigned char c) { return c < 0x80; })) {
    for (char& c : s) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
    return;
  }
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = bpe::utf8_len(b[i]);
    std::int32_t l[3];
    const std::int32_t n = lowercase(static_cast<std::int32_t>(bpe::decode_at(b + i, len)), l);
    for (std::int32_t k = 0; k < n; ++k) append_utf8(out, static_cast<std::uint32_t>(l[k]));
    i += len;
  }
  s.swap(out);
}

}  // namespace headsep::hf
