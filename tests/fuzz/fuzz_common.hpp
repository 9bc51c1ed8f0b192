// Shared by every fuzz harness (tests/fuzz/fuzz_*.hpp). Why the harnesses look the way they do:
//  - Each harness is one `fuzz_one(const uint8_t*, size_t)` in a header, compiled twice: into a
//    libFuzzer binary (fuzz_*.cpp, -fsanitize=fuzzer) and into the Catch2 test that replays
//    tests/fuzz/corpus and tests/fuzz/regressions in the normal suite (no clang needed there).
//  - The only accepted outcome besides success is a headsep::Error (InputError, UsageError and
//    PluginError derive from it): the parser refused the input with a message. Anything else is
//    a finding: a crash or sanitizer report, another exception type (std::bad_alloc, a
//    nlohmann::json exception, std::out_of_range ...), a hang, or a broken invariant — harnesses
//    check what the parser promises about what it returns and throw `Finding` when it lies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "headsep/batch.hpp"
#include "headsep/error.hpp"

namespace headsep::fuzz {

/// A broken invariant: never caught by a harness, so libFuzzer reports it and Catch2 fails.
struct Finding : std::logic_error {
  explicit Finding(const std::string& what) : std::logic_error("fuzz finding: " + what) {}
};

inline void expect(bool ok, const std::string& what) {
  if (!ok) throw Finding(what);
}

/// HEADSEP_FUZZ_VERBOSE=1: print every refusal (to see how deep an input gets).
inline bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("HEADSEP_FUZZ_VERBOSE");
    return e && *e && *e != '0';
  }();
  return v;
}

/// Runs `f`; a headsep::Error (the parser refused the input with a message) is a valid outcome.
/// Returns true when `f` completed.
template <class F>
bool accepted(F&& f) {
  try {
    f();
    if (verbose()) std::fprintf(stderr, "fuzz: accepted\n");
    return true;
  } catch (const Error& e) {
    if (verbose()) std::fprintf(stderr, "fuzz: refused: %s\n", e.what());
    expect(e.what()[0] != '\0', "a headsep::Error with an empty message");
    return false;
  }
}

/// Reads fuzz bytes as a stream of small decisions; past the end every read gives 0, so short
/// inputs stay meaningful (the common, well-formed choice is always the 0 one).
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  bool empty() const noexcept { return i_ >= n_; }
  std::size_t left() const noexcept { return i_ < n_ ? n_ - i_ : 0; }
  std::uint8_t u8() noexcept { return i_ < n_ ? p_[i_++] : 0; }
  std::uint32_t u32() noexcept {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= std::uint32_t(u8()) << (8 * k);
    return v;
  }
  std::uint64_t u64() noexcept { return std::uint64_t(u32()) | std::uint64_t(u32()) << 32; }
  /// Up to `max` raw bytes (length from one byte).
  std::string_view bytes(std::size_t max) noexcept {
    const std::size_t want = u8() % (max + 1);
    const std::size_t take = want < left() ? want : left();
    std::string_view s(reinterpret_cast<const char*>(p_ + i_), take);
    i_ += take;
    return s;
  }
  /// The rest of the input.
  std::string_view rest() noexcept {
    std::string_view s(reinterpret_cast<const char*>(p_ + (i_ < n_ ? i_ : n_)), left());
    i_ = n_;
    return s;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

/// What every ReportSource promises about a batch it returns (batch.hpp): sizes agree, indices
/// are in range, feature values are finite.
inline void check_batch(const Schema& schema, const ReportBatch& b, const std::string& who) {
  const std::string w = who + ": ";
  expect(!b.token_offset.empty() && b.token_offset[0] == 0, w + "token_offset[0] != 0");
  for (std::size_t r = 0; r + 1 < b.token_offset.size(); ++r)
    expect(b.token_offset[r] <= b.token_offset[r + 1], w + "token offsets decrease");
  const std::size_t n = b.n_tokens(), reports = b.n_reports();
  expect(b.features.size() == schema.feature_names.size(), w + "feature column count differs from the schema");
  for (const auto& f : b.features) {
    expect(f.size() == n, w + "a feature column's length differs from the token count");
    for (double x : f) expect(x - x == 0, w + "a non-finite feature value got through");
  }
  expect(b.report_ids.empty() || b.report_ids.size() == reports, w + "report id count differs from the report count");
  expect(b.token_names.empty() || b.token_names.size() == n, w + "token name count differs from the token count");
  for (auto s : b.scenarios) expect(s < schema.scenario_names.size(), w + "scenario index out of range");
  if (!b.given_weights.empty()) {
    expect(b.given_weights.size() == b.scenarios.size() * (std::size_t(schema.given_heads) + 1),
           w + "given weight rows != scenarios x (given_heads + 1)");
    for (const auto& g : b.given_weights) expect(g.size() == n, w + "a given weight row's length differs from the token count");
  }
  if (schema.d_model) expect(b.embeddings.size() == n * schema.d_model, w + "embeddings size != tokens x d_model");
}

}  // namespace headsep::fuzz
