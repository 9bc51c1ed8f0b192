// Differential test: headsep's CSV tokenizer (runtime/io/csv_reader.hpp) against Python's csv module
// (tests/fuzz/csv_reference.py, /usr/bin/python3, stdlib only) on generated tricky files: quoted
// fields holding separators, doubled quotes, CR / LF / CRLF inside and between records, mixed
// record terminators, a BOM at the start and inside, empty and quoted-empty fields, trailing
// separators, blank lines, non-ASCII text, and mutations that break the quoting. Two files are
// over 1 MiB so records straddle the reader's block boundary. The seed is fixed: every run
// checks the same files.
//
// Both accept: every record and field must be equal, byte for byte. Both reject: fine. Python
// accepts and headsep rejects: allowed only for headsep's deliberate difference below, with a
// clear message naming the line. headsep accepts what Python (strict=True) rejects: a failure.
//
// Deliberate difference: a quote inside an unquoted field (`a"b`, ` "a"`) is kept as a literal
// character by Python, refused by headsep ("quote inside unquoted field N (quote the whole
// field and double the quote)"): such a field is almost always a mis-quoted one, and reading it
// literally would silently shift what a user meant.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "io/csv_reader.hpp"
#include "headsep/error.hpp"
#include "test_util.hpp"

using namespace headsep;

namespace {

using Rows = std::vector<std::vector<std::string>>;

struct Parsed {
  Rows rows;
  std::string error;  // empty = accepted
};

Parsed parse_headsep(const std::string& path) {
  Parsed p;
  try {
    CsvReader r(path);
    while (r.next()) {
      p.rows.emplace_back();
      for (std::size_t i = 0; i < r.size(); ++i) p.rows.back().emplace_back(r[i]);
    }
  } catch (const InputError& e) {
    p.error = e.what();
    if (p.error.empty()) p.error = "(empty message)";
  }
  return p;
}

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  std::string file(std::size_t min_bytes = 0) {
    std::string s;
    if (chance(0.15)) s += "\xEF\xBB\xBF";
    const int records = 1 + pick(12);
    for (int r = 0; r < records || s.size() < min_bytes; ++r) {
      if (chance(0.1)) s += terminator();  // a blank line
      record(s, r + 1 == records && min_bytes == 0);
    }
    if (chance(0.35)) mutate(s);
    return s;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::string terminator() {
    switch (pick(4)) {
      case 0: return "\r\n";
      case 1: return "\r";
      default: return "\n";
    }
  }
  // Text that needs no quoting.
  std::string plain() {
    static const char* pieces[] = {"a", "b", "xyz", " ", "1.5", "-0", "\t", "한", "압력이상", "\xEF\xBB\xBF", "'", "é", "\\"};
    std::string f;
    const int n = pick(4);
    for (int i = 0; i < n; ++i) f += pieces[pick(13)];
    return f;
  }
  // Text for a quoted field: anything, quotes doubled.
  std::string quoted() {
    static const char* pieces[] = {"a", ",", "\"\"", "\n", "\r\n", "\r", " ", "한", "x,y", "\"\"\"\"", "\xEF\xBB\xBF", "\n\n"};
    std::string f = "\"";
    const int n = pick(5);
    for (int i = 0; i < n; ++i) f += pieces[pick(12)];
    return f + "\"";
  }
  void record(std::string& s, bool last) {
    const int fields = 1 + pick(5);
    for (int i = 0; i < fields; ++i) {
      if (i) s += ',';
      switch (pick(5)) {
        case 0: break;  // empty
        case 1: s += "\"\""; break;
        case 2: s += quoted(); break;
        default: s += plain(); break;
      }
    }
    if (chance(0.1)) s += ',';  // a trailing separator: one more empty field
    if (!last || chance(0.6)) s += terminator();
  }
  // Breaks the quoting now and then: a stray quote, a lone CR, a lost byte, a cut-off end — always
  // at an ASCII byte, so the file stays UTF-8 (Python reads text, headsep bytes).
  void mutate(std::string& s) {
    const int n = 1 + pick(3);
    for (int i = 0; i < n && !s.empty(); ++i) {
      std::size_t at = std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng_);
      while (at > 0 && static_cast<unsigned char>(s[at]) >= 0x80) --at;
      if (static_cast<unsigned char>(s[at]) >= 0x80) continue;
      switch (pick(4)) {
        case 0: s.insert(at, 1, '"'); break;
        case 1: s.insert(at, 1, '\r'); break;
        case 2: s.erase(at, 1); break;
        default: s.resize(at); break;
      }
    }
  }

  std::mt19937_64 rng_;
};

std::string shown(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\r') o += "\\r";
    else if (c == '"') o += "\\\"";
    else if (c < 0x20) o += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else o += static_cast<char>(c);
  }
  return "\"" + o + "\"";
}

}  // namespace

TEST_CASE("the CSV reader agrees with Python's csv module on generated tricky files", "[csv][differential]") {
  testutil::TempDir dir;
  Generator gen(20260401);
  std::vector<std::string> names, contents;
  constexpr int kFiles = 400;
  for (int i = 0; i < kFiles + 2; ++i) {
    // The last two are over 1 MiB: records and quoted fields straddle the reader's 1 MiB blocks.
    const std::string bytes = i < kFiles ? gen.file() : gen.file((std::size_t(1) << 20) + 4096);
    names.push_back("f" + std::to_string(i) + ".csv");
    contents.push_back(bytes);
    testutil::write_file(dir.file(names.back()), bytes);
  }
  std::string cmd = "/usr/bin/python3 " + testutil::shell_quote(std::string(HEADSEP_SOURCE_DIR) + "/tests/fuzz/csv_reference.py");
  for (const auto& n : names) cmd += " " + testutil::shell_quote(dir.file(n));
  const auto py = testutil::run_shell(cmd);
  INFO(py.err);
  REQUIRE(py.status == 0);
  const auto ref = nlohmann::json::parse(py.out);

  int both_ok = 0, both_reject = 0, deliberate = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& r = ref.at(names[i]);
    const Parsed h = parse_headsep(dir.file(names[i]));
    INFO("file " << names[i] << ": " << (contents[i].size() < 400 ? shown(contents[i]) : std::to_string(contents[i].size()) + " bytes"));
    INFO("headsep: " << (h.error.empty() ? "accepted" : h.error));
    INFO("python: " << r.dump().substr(0, 600));
    if (r.contains("error")) {
      CHECK_FALSE(h.error.empty());  // headsep accepted what strict RFC 4180 rejects
      ++both_reject;
      continue;
    }
    const Rows want = r.at("rows").get<Rows>();
    if (!h.error.empty()) {
      // The one deliberate difference; the message names the file and the line.
      CHECK(h.error.find("quote inside unquoted field") != std::string::npos);
      CHECK(h.error.rfind(dir.file(names[i]) + ":", 0) == 0);
      bool literal_quote = false;
      for (const auto& row : want)
        for (const auto& f : row) literal_quote = literal_quote || f.find('"') != std::string::npos;
      CHECK(literal_quote);
      ++deliberate;
      continue;
    }
    REQUIRE(h.rows.size() == want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO("record " << k + 1);
      REQUIRE(h.rows[k].size() == want[k].size());
      for (std::size_t f = 0; f < want[k].size(); ++f) {
        INFO("field " << f + 1);
        CHECK(h.rows[k][f] == want[k][f]);
      }
    }
    ++both_ok;
  }
  // The generator must exercise all three outcomes, not only the easy one.
  WARN("agreed: " << both_ok << ", both rejected: " << both_reject << ", deliberate difference: " << deliberate);
  CHECK(both_ok > kFiles / 4);
  CHECK(both_reject > 10);
  CHECK(deliberate > 10);
}
