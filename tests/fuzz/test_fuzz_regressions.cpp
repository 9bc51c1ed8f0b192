// Replays every seed input (tests/fuzz/corpus/<harness>/) and every input a fuzzer once broke
// (tests/fuzz/regressions/<harness>/) through the same harness functions the libFuzzer binaries
// call, compiled here without libFuzzer: the normal suite (and its ASan+UBSan build) keeps every
// finding fixed without clang. A failure names the harness and the file; to rerun one input
// under libFuzzer: `build-fuzz/tests/fuzz/fuzz_<harness> FILE`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_axes.hpp"
#include "fuzz_csv.hpp"
#include "fuzz_params.hpp"
#include "fuzz_plugin.hpp"
#include "fuzz_safetensors.hpp"
#include "fuzz_tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

using FuzzOne = int (*)(const std::uint8_t*, std::size_t);

// Every file under tests/fuzz/<kind>/<harness>/, sorted (stable output).
std::vector<fs::path> inputs(const std::string& kind, const std::string& harness) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(HEADSEP_SOURCE_DIR) / "tests" / "fuzz" / kind / harness;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t replay(const std::string& harness, FuzzOne fuzz_one) {
  std::size_t n = 0;
  for (const char* kind : {"corpus", "regressions"})
    for (const auto& file : inputs(kind, harness)) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      INFO(harness << ": " << file.string() << " (" << bytes.size() << " bytes)");
      CHECK_NOTHROW(fuzz_one(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
      ++n;
    }
  return n;
}

}  // namespace

TEST_CASE("fuzz corpus and regressions: csv", "[fuzz]") { CHECK(replay("csv", headsep::fuzz::csv::fuzz_one) > 0); }

TEST_CASE("fuzz corpus and regressions: axes", "[fuzz]") { CHECK(replay("axes", headsep::fuzz::axes::fuzz_one) > 0); }

TEST_CASE("fuzz corpus and regressions: params", "[fuzz]") { CHECK(replay("params", headsep::fuzz::params::fuzz_one) > 0); }

TEST_CASE("fuzz corpus and regressions: plugin", "[fuzz]") { CHECK(replay("plugin", headsep::fuzz::plugin::fuzz_one) > 0); }

TEST_CASE("fuzz corpus and regressions: safetensors", "[fuzz]") {
  CHECK(replay("safetensors", headsep::fuzz::safetensors::fuzz_one) > 0);
}

TEST_CASE("fuzz corpus and regressions: tokenizer", "[fuzz]") {
  CHECK(replay("tokenizer", headsep::fuzz::tokenizer::fuzz_one) > 0);
}

TEST_CASE("the tokenizer harness reads byte-level tokens back to the text's bytes", "[fuzz]") {
  using headsep::fuzz::tokenizer::token_bytes;
  CHECK(token_bytes("\xc4\xa0stop") == " stop");  // Ġ: the space
  CHECK(token_bytes("\xc4\x8a") == "\n");         // Ċ: the newline
  CHECK(token_bytes("\xc3\xa9") == "\xe9");        // é stands for byte 0xE9 (half of a UTF-8 character)
  CHECK_THROWS_AS(token_bytes("\xe2\x96\x81"), headsep::fuzz::Finding);  // ▁ is no byte-level character
}

TEST_CASE("fuzz harnesses accept the empty input", "[fuzz]") {
  const std::uint8_t none[1] = {0};
  CHECK_NOTHROW(headsep::fuzz::csv::fuzz_one(none, 0));
  CHECK_NOTHROW(headsep::fuzz::axes::fuzz_one(none, 0));
  CHECK_NOTHROW(headsep::fuzz::params::fuzz_one(none, 0));
  CHECK_NOTHROW(headsep::fuzz::plugin::fuzz_one(none, 0));
  CHECK_NOTHROW(headsep::fuzz::safetensors::fuzz_one(none, 0));
  CHECK_NOTHROW(headsep::fuzz::tokenizer::fuzz_one(none, 0));
}

TEST_CASE("fuzz harnesses refuse JSON nested 300 000 deep without a crash (tokenizer.json, safetensors header)", "[fuzz]") {
  // Generated here rather than committed (600 KB each); corpus/ holds small seeds just past the
  // limit. Closed brackets: a complete document is what once overflowed the stack (copies, dumps).
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  const std::string tok = "\x06{\"model\": " + deep + "}";
  CHECK_NOTHROW(headsep::fuzz::tokenizer::fuzz_one(reinterpret_cast<const std::uint8_t*>(tok.data()), tok.size()));
  const std::string header = "{\"__metadata__\": " + deep + "}";
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  st += header;
  CHECK_NOTHROW(headsep::fuzz::safetensors::fuzz_one(reinterpret_cast<const std::uint8_t*>(st.data()), st.size()));
}
