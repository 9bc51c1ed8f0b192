// The report module (runtime/report): the data behind each figure (scales, ticks, bins, marker
// positions), escaping, well-formed SVG, determinism, size bound, sweeps. The browser end of it
// is tests/report/browser_test.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <set>

#include "headsep/error.hpp"
#include "report/report.hpp"
#include "model/model_dir.hpp"
#include "test_util.hpp"

using namespace testutil;
namespace rp = headsep::report;
using Catch::Contains;

namespace {

// Well-formed XML, by the Python standard library's parser (expat).
bool well_formed(const std::string& path) {
  auto r = run_shell("python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' " + shell_quote(path));
  if (r.status != 0) UNSCOPED_INFO(r.err);
  return r.status == 0;
}

// Pixel position (translate) and data position (data-x, data-y) of the first marker of head H in
// the point set of `set`.
struct Placed {
  double px, py, x, y;
};
Placed marker_at(const std::string& svg, int head, const std::string& set = "report") {
  const auto start = svg.find("class=\"point-set " + set + "\"");
  REQUIRE(start != std::string::npos);
  std::smatch m;
  const std::string tail = svg.substr(start);
  std::regex re("class=\"marker head-" + std::to_string(head) +
                "\" data-head=\"[0-9]+\" data-x=\"([^\"]+)\" data-y=\"([^\"]+)\"[^>]*transform=\"translate\\(([-0-9.]+),([-0-9.]+)\\)\"");
  REQUIRE(std::regex_search(tail, m, re));
  return {std::stod(m[3]), std::stod(m[4]), std::stod(m[1]), std::stod(m[2])};
}

std::size_t occurrences(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: escaping keeps any text well-formed", "[report]") {
  CHECK(rp::escape("<b a=\"1\">&'</b>") == "&lt;b a=&quot;1&quot;&gt;&amp;&#39;&lt;/b&gt;");
  CHECK(rp::escape("정지결정 압력이상") == "정지결정 압력이상");
  CHECK(rp::escape("a\xff" "b") == "a\xEF\xBF\xBD" "b");           // invalid byte
  CHECK(rp::escape("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");       // overlong '/'
  CHECK(rp::escape("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(rp::escape("x\x01y\tz") == "x\xEF\xBF\xBDy\tz");            // controls, tab kept
  CHECK(rp::escape("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");       // astral plane kept
  CHECK(rp::escape("\xE6\x97") == "\xEF\xBF\xBD\xEF\xBF\xBD");       // cut sequence
}

TEST_CASE("report: numbers for people", "[report]") {
  CHECK(rp::number(0.335) == "0.335");
  CHECK(rp::number(1.14) == "1.14");
  CHECK(rp::number(0.25) == "0.25");
  CHECK(rp::number(1.2000000000000002) == "1.2");
  CHECK(rp::number(-0.1) == "-0.1");
  CHECK(rp::number(1234.56) == "1235");
  CHECK(rp::number(0.000123) == "1.23e-4");
  CHECK(rp::number(2.5e6) == "2.5e6");
  CHECK(rp::number(0) == "0");
  CHECK(rp::count(100000) == "100,000");
  CHECK(rp::count(10000000) == "10,000,000");
  CHECK(rp::count(999) == "999");
}

TEST_CASE("report: nice ticks and scales", "[report]") {
  // The seed's contexts: x in [1.0, 2.1], y in [0.5, 1.2], padded by 5 %.
  auto x = rp::nice_ticks(1.0 - 0.055, 2.1 + 0.055);
  CHECK(x.step == Approx(0.5));
  CHECK(x.lo == Approx(0.5));
  CHECK(x.hi == Approx(2.5));
  CHECK(x.values.size() == 5);
  auto y = rp::nice_ticks(0.5 - 0.035, 1.2 + 0.035);
  CHECK(y.step == Approx(0.2));
  CHECK(y.lo == Approx(0.4));
  CHECK(y.hi == Approx(1.4));
  CHECK(y.label(y.values[1]) == "0.6");
  CHECK(y.label(0.0) == "0.0");
  auto z = rp::nice_ticks(3, 3);  // zero width: widened, still covers the value
  CHECK(z.lo < 3);
  CHECK(z.hi > 3);
  auto big = rp::nice_ticks(0, 1e7);
  CHECK(big.step == Approx(2e6));
  rp::Scale s{0.5, 2.5, 64, 388};
  CHECK(s(1.2) == Approx(177.4));
  rp::Scale inv{0.4, 1.4, 262, 50};
  CHECK(inv(0.85) == Approx(166.6));
}

TEST_CASE("report: head markers are distinct colour and shape pairs, the seed's first", "[report]") {
  CHECK(std::string(rp::marker(0).colour) == "#808080");
  CHECK(std::string(rp::marker(0).shape) == "circle");
  CHECK(std::string(rp::marker(1).colour) == "#0072B2");
  CHECK(std::string(rp::marker(1).shape) == "triangle");
  CHECK(std::string(rp::marker(2).colour) == "#E69F00");
  CHECK(std::string(rp::marker(2).shape) == "square");
  std::set<std::pair<std::string, std::string>> seen;
  std::set<std::string> colours, shapes;
  for (std::uint32_t h = 1; h <= 64; ++h) {
    seen.insert({rp::marker(h).colour, rp::marker(h).shape});
    if (h <= 8) colours.insert(rp::marker(h).colour), shapes.insert(rp::marker(h).shape);
  }
  CHECK(seen.size() == 64);
  CHECK(colours.size() == 8);  // the first 8 heads differ in colour and in shape
  CHECK(shapes.size() == 8);
}

TEST_CASE("report: the seed's plot puts every marker at the seed's contexts", "[report][seed]") {
  TempDir dir;
  auto r = run_cli("example --report-html " + shell_quote(dir.file("r.html")) + " --plot-svg " + shell_quote(dir.file("svg")));
  REQUIRE(r.status == 0);
  CHECK(r.out == read_file(source_path("tests/seed/expected-output.txt")));  // stdout unchanged
  const std::string svg = read_file(dir.file("svg/seed-plot-0.svg"));
  REQUIRE(!svg.empty());
  CHECK(well_formed(dir.file("svg/seed-plot-0.svg")));
  CHECK_THAT(svg, Contains("data-scenario=\"balanced_heads\""));
  // Hand-computed: x ticks 0.5..2.5 over pixels 64..388, y ticks 0.4..1.4 over 262..50.
  auto px = [](double x) { return 64 + (x - 0.5) / 2.0 * 324; };
  auto py = [](double y) { return 262 - (y - 0.4) / 1.0 * 212; };
  // The seed's printed contexts (rounded there) and the engine's exact ones, drawn where the
  // hand-computed scales put them (to the 0.01 px the SVG is written with).
  const double seed[3][2] = {{1.3, 0.9}, {1.2, 0.85}, {1.5, 1.0}};
  for (int h = 0; h < 3; ++h) {
    auto p = marker_at(svg, h);
    CHECK(p.x == Approx(seed[h][0]).margin(1e-4));
    CHECK(p.y == Approx(seed[h][1]).margin(1e-4));
    CHECK(p.px == Approx(px(p.x)).margin(0.006));
    CHECK(p.py == Approx(py(p.y)).margin(0.006));
  }
  CHECK(marker_at(svg, 1).px == Approx(177.4).margin(0.02));  // head 1 at (1.2, 0.85), by hand
  CHECK(marker_at(svg, 1).py == Approx(166.6).margin(0.02));
  CHECK_THAT(svg, Contains("head_separation = 0.335"));
  // The marker shapes and colours the seed names.
  CHECK_THAT(svg, Contains("class=\"marker head-1\""));
  CHECK(std::regex_search(svg, std::regex("class=\"marker head-1\"[^>]*fill=\"#0072B2\"")));
  CHECK(std::regex_search(svg, std::regex("class=\"marker head-2\"[^>]*fill=\"#E69F00\"")));
  CHECK(std::regex_search(svg, std::regex("class=\"marker head-0\"[^>]*fill=\"#808080\"")));
  const std::string s2 = read_file(dir.file("svg/seed-plot-1.svg"));
  CHECK_THAT(s2, Contains("head_separation = 1.14"));
  auto q = marker_at(s2, 2);
  CHECK(q.px == Approx(px(1.9)).margin(0.02));
  CHECK(q.py == Approx(py(1.2)).margin(0.02));
  // Every figure file is well-formed XML; the HTML names the figures and the run.
  for (const auto& e : std::filesystem::directory_iterator(dir.file("svg"))) CHECK(well_formed(e.path().string()));
  const std::string html = read_file(dir.file("r.html"));
  for (const char* id : {"seed-plot-0", "seed-plot-1", "seed-plot-2", "dist-head_separation", "dist-diff-0", "dist-diff-3",
                         "run-header"})
    CHECK_THAT(html, Contains(std::string("id=\"") + id + "\""));
  CHECK_THAT(html, Contains("headsep example --report-html"));
  CHECK_THAT(html, !Contains("<script"));
  CHECK_THAT(html, !Contains("http://www.w3.org/1999/xlink"));
  CHECK(std::regex_search(html, std::regex("(src|href)=\"https?:")) == false);
}

TEST_CASE("report: user strings are escaped in HTML and SVG", "[report]") {
  TempDir dir;
  const std::string csv =
      "report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight\n"
      "\"r<1>&\",\"<script>alert('x')</script>\",\"정지\"\"결정\",1,0,0,0.5,0.2,0.9\n"
      "\"r<1>&\",\"<script>alert('x')</script>\",b&c,0,1,1,0.5,0.8,0.1\n";
  write_file(dir.file("evil.csv"), csv);
  auto r = run_cli("run --input " + shell_quote(dir.file("evil.csv")) + " --summary " + shell_quote(dir.file("s.json")) +
                   " --report-html " + shell_quote(dir.file("r.html")) + " --plot-svg " + shell_quote(dir.file("svg")) + " -q");
  REQUIRE(r.status == 0);
  const std::string html = read_file(dir.file("r.html"));
  CHECK_THAT(html, !Contains("<script"));
  CHECK_THAT(html, Contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
  CHECK_THAT(html, Contains("r&lt;1&gt;&amp;"));
  for (const auto& e : std::filesystem::directory_iterator(dir.file("svg"))) CHECK(well_formed(e.path().string()));
}

TEST_CASE("report: histogram bins and quantile lines come from the summary, on one shared axis", "[report]") {
  TempDir dir;
  auto r = run_cli("run -s ops-reports -p reports=20000 -w axis-focus -q --summary " + shell_quote(dir.file("s.json")) +
                   " --plot-svg " + shell_quote(dir.file("svg")) + " --bins 16");
  REQUIRE(r.status == 0);
  auto summary = nlohmann::json::parse(read_file(dir.file("s.json")));
  const std::string svg = read_file(dir.file("svg/dist-head_separation.svg"));
  CHECK(well_formed(dir.file("svg/dist-head_separation.svg")));
  // One row per scenario; its bars count every report; its p50 line is the summary's p50.
  std::size_t row = 0;
  for (const auto& s : summary["scenarios"]) {
    const std::string name = s["scenario"];
    auto start = svg.find("<g class=\"row\" data-scenario=\"" + name + "\"");
    REQUIRE(start != std::string::npos);
    const std::string body = svg.substr(start, svg.find("</g>", start) - start);
    std::uint64_t total = 0;
    std::size_t bars = 0;
    std::regex bar("data-count=\"([0-9]+)\"");
    for (std::sregex_iterator it(body.begin(), body.end(), bar), end; it != end; ++it) total += std::stoull((*it)[1]), ++bars;
    CHECK(total == s["count"].get<std::uint64_t>());
    CHECK(bars <= 16);
    std::smatch m;
    REQUIRE(std::regex_search(body, m, std::regex("class=\"q p50\" data-value=\"([^\"]+)\"")));
    CHECK(std::stod(m[1]) == s["metrics"]["head_separation"]["p50"].get<double>());
    ++row;
  }
  CHECK(row == 3);
  // One x axis for all rows.
  CHECK(occurrences(svg, "<g class=\"axis x\">") == 1);
}

// No ';' in a test name: catch_discover_tests cuts the name there and CTest then runs nothing.
TEST_CASE("report: large runs draw the top reports and the mean, whatever the threads or chunking",
          "[report]") {
  TempDir dir;
  auto a = run_cli("run -s ops-reports -p reports=30000 -w axis-focus -q --threads 1 --chunk 4096 --plot-svg " + shell_quote(dir.file("a")));
  auto b = run_cli("run -s ops-reports -p reports=30000 -w axis-focus -q --threads 2 --chunk 1000 --plot-svg " + shell_quote(dir.file("b")));
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("a"))) {
    const auto name = e.path().filename().string();
    CHECK(read_file(e.path().string()) == read_file(dir.file("b/" + name)));
    ++files;
  }
  CHECK(files == 1 + 3 + 4);  // the head_separation histogram, 3 seed plots, 4 difference components
  const std::string svg = read_file(dir.file("a/seed-plot-1.svg"));
  CHECK(occurrences(svg, "class=\"point-set report\"") == 5);
  CHECK(occurrences(svg, "class=\"point-set mean\"") == 1);
  CHECK_THAT(svg, Contains("30,000 reports"));
}

TEST_CASE("report: the size of a report is bounded, whatever the number of reports", "[report][limits]") {
  TempDir dir;
  auto small = run_cli("run -s ops-reports -p reports=1000 -w axis-focus -q --report-html " + shell_quote(dir.file("s.html")));
  auto large = run_cli("run -s ops-reports -p reports=300000 -w axis-focus -q --report-html " + shell_quote(dir.file("l.html")));
  REQUIRE(small.status == 0);
  REQUIRE(large.status == 0);
  const auto s = std::filesystem::file_size(dir.file("s.html")), l = std::filesystem::file_size(dir.file("l.html"));
  CHECK(l < 200 * 1024);
  CHECK(double(l) < 1.1 * double(s));  // the same figures; only numbers differ
}

TEST_CASE("report: attention views (per-head maps with tokens, entropy, confidence, JS heatmap, layer x head grid)",
          "[report][attention]") {
  TempDir dir;
  auto r = run_cli("run -s ops-reports -p reports=300 -p names=true -p d_model=16 -w qkv -p heads=4 -q --report-html " +
                   shell_quote(dir.file("r.html")) + " --plot-svg " + shell_quote(dir.file("svg")));
  REQUIRE(r.status == 0);
  const std::string html = read_file(dir.file("r.html"));
  for (const char* id : {"attn-entropy-0", "attn-confidence-0", "js-0", "grid-0", "map-0-0-h0", "map-0-0-h4", "map-0-1-h4"})
    CHECK_THAT(html, Contains(std::string("id=\"") + id + "\""));
  // qkv is one scenario: the top 10 reports (--top's default) x (baseline + 4 heads) maps.
  CHECK(occurrences(html, "class=\"fig attention-map\"") == 10 * 5);
  // The grid links each head to its maps; the JS heatmap has heads x heads cells.
  CHECK_THAT(html, Contains("<a href=\"#map-0-0-h3\">"));
  const std::string js = read_file(dir.file("svg/js-0.svg"));
  CHECK(occurrences(js, "<g class=\"cell\"") == 16);
  CHECK(well_formed(dir.file("svg/js-0.svg")));
  CHECK(well_formed(dir.file("svg/map-0-0-h1.svg")));
  // Token labels: ops-reports names its tokens (names=true).
  CHECK(std::regex_search(read_file(dir.file("svg/map-0-0-h1.svg")), std::regex("class=\"token key\"[^>]*>[^<]+<")));
}

TEST_CASE("report: the attention maps are those of the summary's top-k reports, for any threads and chunk",
          "[report][attention]") {
  TempDir dir;
  const std::string job = "run -s ops-reports -p reports=3000 -p names=true -p d_model=16 -w qkv -p heads=3 -q --top 4 ";
  std::vector<std::string> dirs;
  for (const char* tc : {"--threads 1 --chunk 37", "--threads 2 --chunk 200", "--threads 2 --chunk 3000"}) {
    const std::string d = dir.file("svg" + std::to_string(dirs.size())), js = d + ".json";
    auto r = run_cli(job + tc + " --summary " + shell_quote(js) + " --plot-svg " + shell_quote(d));
    INFO(tc << ": " << r.err);
    REQUIRE(r.status == 0);
    dirs.push_back(d);
    const auto j = nlohmann::json::parse(read_file(js));
    REQUIRE(j["scenarios"].size() == 1);
    const auto& top = j["scenarios"][0]["top"];
    REQUIRE(top.size() == 4);
    for (std::size_t m = 0; m < top.size(); ++m)
      for (int h = 0; h <= 3; ++h) {
        const std::string f = d + "/map-0-" + std::to_string(m) + "-h" + std::to_string(h) + ".svg";
        REQUIRE(std::filesystem::exists(f));
        std::smatch x;
        const std::string svg = read_file(f);
        REQUIRE(std::regex_search(svg, x, std::regex("data-report=\"([^\"]*)\" data-report-index=\"([0-9]+)\"")));
        CHECK(x[1] == top[m]["report_id"].get<std::string>());
        CHECK(std::stoull(x[2]) == top[m]["report_index"].get<std::uint64_t>());
      }
    CHECK(!std::filesystem::exists(d + "/map-0-4-h0.svg"));
  }
  // Byte-identical figures for every thread count and chunk size.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dirs[0]))
    for (std::size_t i = 1; i < dirs.size(); ++i, ++files)
      CHECK(read_file(e.path().string()) == read_file(dirs[i] + "/" + e.path().filename().string()));
  CHECK(files >= 2 * 16);
  // --attention keeps exactly the reports --attention-reports names, with or without a report.
  const std::string keep = " --attention-reports first:3 --attention ";
  REQUIRE(run_cli(job + keep + shell_quote(dir.file("a.jsonl"))).status == 0);
  REQUIRE(run_cli(job + keep + shell_quote(dir.file("b.jsonl")) + " --report-html " + shell_quote(dir.file("b.html"))).status == 0);
  CHECK(read_file(dir.file("a.jsonl")) == read_file(dir.file("b.jsonl")));
  CHECK(occurrences(read_file(dir.file("a.jsonl")), "\"report_id\"") == 3);
}

TEST_CASE("report: the map cell budget goes to every scenario's top report first", "[report][attention][limits]") {
  rp::ReportData d;
  d.axes = {"x", "y"};
  d.heads = 12;
  d.attention = true;
  for (int i = 0; i < 3; ++i) {
    rp::Scenario s;
    s.name = "s" + std::to_string(i);
    s.count = 100;
    s.context_mean.assign(13 * 2, 0.5);
    s.entropy.assign(13, rp::Stats{});
    s.confidence.assign(13, rp::Stats{});
    s.js_mean.assign(66, 0.1);
    s.pair_separation_mean.assign(66, 0.2);
    s.differences.assign(12 * 2, rp::Distribution{});
    for (int m = 0; m < 10; ++m) {
      rp::AttentionMap a;
      a.id = s.name + "-" + std::to_string(m);
      a.index = std::uint64_t(m);
      a.n = 40, a.queries = 32, a.all_queries = 40, a.keys = 32;
      a.tokens.assign(32, "t");
      a.maps.assign(13 * 32 * 32, 1.0f / 32);
      s.maps.push_back(a);
    }
    d.scenarios.push_back(s);
  }
  // 13 x 32 x 32 = 13,312 cells per report: the top report of each of the 3 scenarios, then the
  // first scenario's second fit the 60,000 cells.
  const auto figs = rp::figures(d);
  std::map<std::string, int> maps;
  for (const auto& f : figs)
    if (f.section == "maps") ++maps[f.id.substr(0, f.id.rfind("-h"))];
  CHECK(maps == std::map<std::string, int>{{"map-0-0", 13}, {"map-0-1", 13}, {"map-1-0", 13}, {"map-2-0", 13}});
  for (const auto& f : figs)
    if (f.id.rfind("grid-", 0) == 0) CHECK(occurrences(f.svg, "<a href=\"#map-") == 12);
  CHECK_THAT(rp::html(d, figs), Contains("not drawn"));
}

TEST_CASE("report: sweep specifications", "[report][sweep]") {
  auto s = rp::parse_sweep("axis-focus.single_sharpness=0.25:4:9");
  CHECK(s.key == "axis-focus.single_sharpness");
  REQUIRE(s.values.size() == 9);
  CHECK(s.values.front() == "0.25");
  CHECK(s.values[1] == "0.71875");
  CHECK(s.values.back() == "4.0");
  auto h = rp::parse_sweep("qkv.heads=1:4:4");
  CHECK(h.values == std::vector<std::string>{"1", "2", "3", "4"});
  auto l = rp::parse_sweep("qkv.heads=1,2,8");
  CHECK(l.values == std::vector<std::string>{"1", "2", "8"});
  auto semi = rp::parse_sweep("positional.heads=prev,first;self,next");
  CHECK(semi.values == std::vector<std::string>{"prev,first", "self,next"});
  CHECK_THROWS_AS(rp::parse_sweep("nokey"), headsep::UsageError);
  CHECK_THROWS_AS(rp::parse_sweep("k=1:2"), headsep::UsageError);
  CHECK_THROWS_AS(rp::parse_sweep("k=1:2:0"), headsep::UsageError);
  CHECK_THROWS_AS(rp::parse_sweep("k=a:2:3"), headsep::UsageError);
  CHECK_THROWS_AS(rp::parse_sweep("k=1,,2"), headsep::UsageError);
}

TEST_CASE("headsep scaling --report-html: speedup and per-stage figures that match the JSON", "[report][cli]") {
  TempDir dir;
  auto r = run_cli("scaling -s ops-reports -w axis-focus -p reports=20000 --chunk 1000 --counts 1,2 --repeat 2 --ceiling -q "
                   "--json " + shell_quote(dir.file("s.json")) + " --report-html " + shell_quote(dir.file("s.html")) +
                   " --plot-svg " + shell_quote(dir.file("svg")));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_file(dir.file("s.json")));
  REQUIRE(j["counts"].size() == 2);
  const std::string speed = read_file(dir.file("svg/scaling-speedup.svg")), stages = read_file(dir.file("svg/scaling-stages.svg"));
  CHECK(well_formed(dir.file("svg/scaling-speedup.svg")));
  CHECK(well_formed(dir.file("svg/scaling-stages.svg")));
  const std::string html = read_file(dir.file("s.html"));
  CHECK_THAT(html, Contains("<section id=\"scaling\">") && Contains("id=\"scaling-speedup\"") &&
                       Contains("id=\"scaling-stages\"") && Contains("1, 2 (headsep scaling)"));
  // Each count's marker sits at the JSON's speedup; the copies' marker at the ceiling's.
  auto values = [](const std::string& svg, const std::string& cls, const std::string& attr) {
    std::map<unsigned, double> out;
    const std::regex re("class=\"" + cls + "\" data-threads=\"([0-9]+)\" data-" + attr + "=\"([^\"]+)\"");
    for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it)
      out[unsigned(std::stoul((*it)[1]))] += std::stod((*it)[2]);
    return out;
  };
  const auto engine = values(speed, "marker engine", "speedup"), copies = values(speed, "marker ceiling", "speedup");
  REQUIRE(engine.size() == 2);
  CHECK(engine.at(1) == Approx(j["counts"][0]["speedup"].get<double>()).epsilon(1e-9));
  CHECK(engine.at(2) == Approx(j["counts"][1]["speedup"].get<double>()).epsilon(1e-9));
  REQUIRE(copies.size() == 1);
  CHECK(copies.at(2) == Approx(j["counts"][1]["ceiling"]["speedup"].get<double>()).epsilon(1e-9));
  // The stacked bars of a count add up to its profile's busy seconds.
  std::map<unsigned, double> busy;
  const std::regex bar("data-threads=\"([0-9]+)\" data-stage=\"[a-z]+\" data-busy=\"([^\"]+)\"");
  for (std::sregex_iterator it(stages.begin(), stages.end(), bar), end; it != end; ++it)
    busy[unsigned(std::stoul((*it)[1]))] += std::stod((*it)[2]);
  for (const auto& c : j["counts"]) {
    double total = 0;
    for (const auto& st : c["profile"]["stages"]) total += st["busy_s"].get<double>();
    CHECK(busy[c["threads"].get<unsigned>()] == Approx(total).epsilon(1e-9));
  }
}

TEST_CASE("headsep sweep: separation against a parameter, as a table, JSON and a figure", "[report][sweep][cli]") {
  TempDir dir;
  auto r = run_cli("sweep -s ops-reports -p reports=2000 -w axis-focus "
                   "-p 'designs=a=decision_axis,evidence_condition_axis' --vary axis-focus.sharpness=0.25:4:4 --json " +
                   shell_quote(dir.file("s.json")) + " --report-html " + shell_quote(dir.file("s.html")) + " --plot-svg " +
                   shell_quote(dir.file("svg")));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("head_separation per scenario against axis-focus.sharpness"));
  auto j = nlohmann::json::parse(read_file(dir.file("s.json")));
  REQUIRE(j["runs"].size() == 4);
  CHECK(j["values"][0] == "0.25");
  CHECK(j["values"][3] == "4.0");
  // Sharper heads read their own axis more exclusively: separation grows with sharpness.
  std::vector<double> p50;
  for (const auto& run : j["runs"]) {
    REQUIRE(run["scenarios"].size() == 1);
    CHECK(run["scenarios"][0]["count"] == 2000);
    p50.push_back(run["scenarios"][0]["head_separation"]["p50"]);
  }
  CHECK(std::is_sorted(p50.begin(), p50.end()));
  CHECK(p50.back() > p50.front());
  const std::string svg = read_file(dir.file("svg/sweep.svg"));
  CHECK(well_formed(dir.file("svg/sweep.svg")));
  CHECK(occurrences(svg, "class=\"marker\"") == 4);
  CHECK_THAT(read_file(dir.file("s.html")), Contains("id=\"sweep\""));
  // The same sweep named by -p KEY=LO:HI:N.
  auto q = run_cli("sweep -s ops-reports -p reports=500 -w axis-focus -p axis-focus.single_sharpness=0:2:3 -q --json " +
                   shell_quote(dir.file("q.json")));
  REQUIRE(q.status == 0);
  CHECK(nlohmann::json::parse(read_file(dir.file("q.json")))["parameter"] == "axis-focus.single_sharpness");
  // Errors: no parameter to vary; a value the plugin refuses (exit 1, no JSON written).
  CHECK(run_cli("sweep -s ops-reports -w axis-focus").status == 2);
  auto bad = run_cli("sweep -s ops-reports -w axis-focus --vary axis-focus.sharpness=a,b --json " + shell_quote(dir.file("bad.json")));
  CHECK(bad.status != 0);
  CHECK(!std::filesystem::exists(dir.file("bad.json")));
}

TEST_CASE("report: an output that cannot be written is an error and leaves nothing behind", "[report]") {
  TempDir dir;
  write_file(dir.file("file"), "x");
  auto r = run_cli("example --report-html " + shell_quote(dir.file("r.html")) + " --plot-svg " + shell_quote(dir.file("file/svg")));
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("--plot-svg"));
  CHECK(!std::filesystem::exists(dir.file("r.html")));
}

TEST_CASE("report: a real model's layer x head grids agree with its summary", "[report][model]") {
  TempDir dir;
  auto r = run_cli("run --model " + shell_quote(testutil::model_dir().string()) + " -s ops-text -p reports=40 -q --summary " +
                   shell_quote(dir.file("s.json")) + " --report-html " + shell_quote(dir.file("r.html")) + " --plot-svg " +
                   shell_quote(dir.file("svg")));
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(read_file(dir.file("s.json")));
  const std::string sep = read_file(dir.file("svg/model-sep-0.svg"));
  CHECK(well_formed(dir.file("svg/model-sep-0.svg")));
  CHECK(occurrences(sep, "<g class=\"cell\"") == 6 * 12);  // MiniLM-L6: 6 layers x 12 heads
  std::size_t checked = 0;
  for (const auto& layer : j["scenarios"][0]["layers"])
    for (const auto& head : layer["heads"]) {
      std::smatch m;
      const std::string key = "data-layer=\"" + std::to_string(layer["layer"].get<int>()) + "\" data-head=\"" +
                              std::to_string(head["head"].get<int>()) + "\" data-value=\"([^\"]+)\"";
      REQUIRE(std::regex_search(sep, m, std::regex(key)));
      CHECK(std::stod(m[1]) == Approx(head["separation"].get<double>()).epsilon(1e-12));
      ++checked;
    }
  CHECK(checked == 72);
  const std::string html = read_file(dir.file("r.html"));
  for (const char* id : {"model-sep-0", "model-js-0", "model-entropy-0", "seed-plot-0", "seed-plot-5"})
    CHECK_THAT(html, Contains(std::string("id=\"") + id + "\""));
  // The seed plot of layer 0: the baseline and 12 heads at their mean contexts.
  CHECK(occurrences(read_file(dir.file("svg/seed-plot-0.svg")), "class=\"marker head-") == 13);
}

// The name starts like the grid test's: the TSan suite skips both (MiniLM is too slow there).
TEST_CASE("report: a real model's layer x head grids link to the top reports' maps, with per-head distributions",
          "[report][model]") {
  TempDir dir;
  const std::string job = "run --model " + shell_quote(testutil::model_dir().string()) + " -s ops-text -p reports=24 -p seed=5 -q ";
  std::vector<nlohmann::json> sums;
  for (const char* tc : {"--threads 1 --chunk 24", "--threads 2 --chunk 5"}) {
    const std::string d = dir.file("svg" + std::to_string(sums.size()));
    auto r = run_cli(job + tc + " --summary " + shell_quote(d + ".json") + " --plot-svg " + shell_quote(d) +
                     (sums.empty() ? " --report-html " + shell_quote(dir.file("r.html")) : std::string()));
    INFO(tc << ": " << r.err);
    REQUIRE(r.status == 0);
    sums.push_back(nlohmann::json::parse(read_file(d + ".json")));
  }
  const auto& sc = sums[0]["scenarios"][0];
  const auto& top = sc["top"];
  REQUIRE(top.size() == 10);  // --top's default
  CHECK(top[0]["separation"].get<double>() >= top[1]["separation"].get<double>());
  // The ranking and the distributions do not depend on threads or chunking.
  CHECK(sums[1]["scenarios"][0]["top"] == top);
  for (std::size_t l = 0; l < 6; ++l) {
    const auto& a = sc["layers"][l], &b = sums[1]["scenarios"][0]["layers"][l];
    CHECK(a["baseline"]["entropy_quantiles"] == b["baseline"]["entropy_quantiles"]);
    for (std::size_t h = 0; h < 12; ++h) {
      const auto& q = a["heads"][h]["entropy_quantiles"];
      CHECK(q == b["heads"][h]["entropy_quantiles"]);
      CHECK(a["heads"][h]["separation_quantiles"] == b["heads"][h]["separation_quantiles"]);
      CHECK(q["p01"].get<double>() <= q["p10"].get<double>());
      CHECK(q["p10"].get<double>() <= q["p50"].get<double>());
      CHECK(q["p50"].get<double>() <= q["p90"].get<double>());
      CHECK(q["p90"].get<double>() <= q["p99"].get<double>());
      const double mean = a["heads"][h]["entropy"];
      CHECK(mean >= q["p01"].get<double>() - 1e-12);
      CHECK(mean <= q["p99"].get<double>() + 1e-12);
    }
  }
  // Every cell of the separation grid links to its head's map in the top report, and that map is
  // drawn (its layer's figure, one per head and the baseline).
  const std::string d0 = dir.file("svg0"), d1 = dir.file("svg1");
  // On the page (the links' anchors are there); the standalone SVG keeps the cells, not the links,
  // whose anchors exist only on the page.
  const std::string page = read_file(dir.file("r.html"));
  const auto at = page.find("id=\"model-sep-0\"");
  REQUIRE(at != std::string::npos);
  const std::string grid = page.substr(at, page.find("</svg>", at) - at);
  CHECK(occurrences(grid, "<a href=\"#map-") == 72);
  const std::string grid_svg = read_file(d0 + "/model-sep-0.svg");
  CHECK(occurrences(grid_svg, "<a href") == 0);
  CHECK(occurrences(grid_svg, "<g class=\"cell\"") == 72);
  const std::regex idx("data-report=\"([^\"]*)\" data-report-index=\"([0-9]+)\"");
  for (int l = 0; l < 6; ++l) {
    for (int h = 1; h <= 12; ++h)
      CHECK_THAT(grid, Contains("<a href=\"#map-" + std::to_string(l) + "-0-h" + std::to_string(h) + "\"><g class=\"cell\" data-layer=\"" +
                                std::to_string(l) + "\" data-head=\"" + std::to_string(h) + "\""));
    for (int h = 0; h <= 12; ++h) {
      const std::string f = d0 + "/map-" + std::to_string(l) + "-0-h" + std::to_string(h) + ".svg";
      REQUIRE(std::filesystem::exists(f));
      std::smatch m;
      const std::string svg = read_file(f);
      REQUIRE(std::regex_search(svg, m, idx));
      CHECK(m[1] == top[0]["report_id"].get<std::string>());
      CHECK(std::stoull(m[2]) == top[0]["report_index"].get<std::uint64_t>());
    }
  }
  // Further maps drawn (within the cell budget) are the next reports of the summary's top.
  std::size_t maps = 0;
  for (const auto& e : std::filesystem::directory_iterator(d0)) {
    const std::string name = e.path().filename().string();
    std::smatch m, r;
    if (!std::regex_match(name, m, std::regex("map-([0-9]+)-([0-9]+)-h([0-9]+)\\.svg"))) continue;
    ++maps;
    const std::string svg = read_file(e.path().string());
    REQUIRE(std::regex_search(svg, r, idx));
    CHECK(std::stoull(r[2]) == top[std::stoul(m[2])]["report_index"].get<std::uint64_t>());
    // The same map for any thread count and chunk size.
    CHECK(svg == read_file(d1 + "/" + name));
  }
  CHECK(maps >= 6 * 13);
  CHECK(maps % 13 == 0);
  // Per layer, entropy (baseline and 12 heads) and separation (12 heads) over the reports.
  CHECK(occurrences(read_file(d0 + "/attn-entropy-0.svg"), "<g class=\"strip head-") == 13);
  CHECK(occurrences(read_file(d0 + "/attn-separation-5.svg"), "<g class=\"strip head-") == 12);
  CHECK(well_formed(d0 + "/attn-separation-5.svg"));
  CHECK(well_formed(d0 + "/map-0-0-h1.svg"));
  const std::string html = read_file(dir.file("r.html"));
  for (const char* id : {"model-distributions", "model-maps", "map-5-0-h12", "attn-entropy-5"})
    CHECK_THAT(html, Contains(std::string("id=\"") + id + "\""));
}
