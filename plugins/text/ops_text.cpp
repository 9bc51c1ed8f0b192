// ops-text — synthetic operations reports as text, from a small grammar of the seed's domain:
// equipment, a measurement, an anomaly, a stop/hold decision and a return condition, in one of
// several sentence shapes (some reports in the seed's Korean tokens). Tokenized like `text`
// (text_reports.hpp). Every choice derives from (seed, report index) through splitmix64, so
// chunk i is the same whatever the chunk size or thread: random access, millions of reports.
#include <array>
#include <string>
#include <string_view>

#include "headsep/plugin_sdk.hpp"
#include "text_reports.hpp"

namespace {

using namespace headsep::sdk;
using headsep_text::ChunkBuilder;
using headsep_text::Tokenizer;

constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

constexpr std::string_view kEquipment[] = {"pump P-#", "compressor C-#", "valve V-#", "turbine T-#", "boiler B-#",
                                           "heat exchanger E-#", "conveyor line #", "cooling tower #"};
constexpr std::string_view kMeasurement[] = {"discharge pressure read $ bar", "vibration reached $ mm/s",
                                             "bearing temperature rose to $ °C", "flow dropped to $ %",
                                             "suction pressure fell to $ kPa", "motor current reached $ A"};
constexpr std::string_view kAnomaly[] = {"pressure anomaly", "abnormal vibration", "temperature spike", "seal leak",
                                         "flow loss", "alarm on the pressure sensor"};
constexpr std::string_view kDecision[] = {"stop decision issued", "the operator ordered a shutdown",
                                          "hold decision taken", "unit stopped and isolated",
                                          "shift lead approved a controlled halt", "restart suspended"};
constexpr std::string_view kReturn[] = {"restart only when the pressure holds below $ bar for # hours",
                                        "return to service after the seal is replaced",
                                        "resume once the lock check is confirmed",
                                        "restart when vibration stays under $ mm/s",
                                        "return condition: inspection cleared and alarm reset",
                                        "resume only if the temperature is stable below $ °C"};
// Sentence shapes: E equipment, M measurement, A anomaly, D decision, R return condition.
constexpr std::string_view kShapes[] = {"E: A, M. D; R.", "D on E after A (M). R.", "M at E, A confirmed. D, R.",
                                        "A at E. R; until then D.", "E M: D. R."};
// The seed's Korean tokens: decision / evidence / condition.
constexpr std::string_view kKorean[3][4] = {{"정지결정", "보류결정", "차단작업", "재가동승인"},
                                            {"압력이상", "진동기록", "잠금확인", "온도상승"},
                                            {"복귀조건", "재가동조건", "예외조건", "분기조건"}};

template <std::size_t N>
std::string_view pick(const std::string_view (&a)[N], std::uint64_t& state) {
  state = mix(state + kGolden);
  return a[(state >> 32) % N];
}

class OpsText final : public ScenarioGenerator {
 public:
  explicit OpsText(const Params& p)
      : tk_(p.get_string("model"), p.get_int("max_tokens"), p.get_string("lexicon")), names_(p.get_bool("names")) {
    const auto reports = p.get_int("reports"), lo = p.get_int("min_sentences"), hi = p.get_int("max_sentences");
    if (reports < 0) throw ParamError("parameter 'reports' must be >= 0, got " + std::to_string(reports));
    if (lo < 1 || hi < lo || hi > 64) throw ParamError("parameters min_sentences..max_sentences must satisfy 1 <= min <= max <= 64");
    korean_ = p.get_double("korean");
    if (!(korean_ >= 0 && korean_ <= 1)) throw ParamError("parameter 'korean' must be in 0..1");
    reports_ = static_cast<std::uint64_t>(reports);
    min_ = static_cast<std::uint32_t>(lo);
    span_ = static_cast<std::uint32_t>(hi - lo + 1);
    key_ = mix(static_cast<std::uint64_t>(p.get_int("seed")) + kGolden);
  }

  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = tk_.features();
    s.random_access = true;
    s.total_reports = reports_;
    return s;
  }

  /// Report r's text (public for the tests through the generator's output: same seed, same text).
  std::string text(std::uint64_t r) const {
    std::uint64_t st = mix(key_ + (r + 1) * kGolden);
    auto number = [&](bool decimal) {
      st = mix(st + kGolden);
      const std::uint64_t v = (st >> 20) % 1000;
      return decimal ? std::to_string(v / 10) + "." + std::to_string(v % 10) : std::to_string(1 + v % 12);
    };
    auto fill = [&](std::string_view tmpl) {
      std::string s;
      for (char c : tmpl) {
        if (c == '#') s += number(false);
        else if (c == '$') s += number(true);
        else s += c;
      }
      return s;
    };
    st = mix(st + kGolden);
    if (double(st >> 11) * 0x1.0p-53 < korean_) {  // the seed's tokens: decision, evidence, condition words
      std::string s;
      for (int k = 0; k < 3; ++k) {
        if (k) s += ' ';
        s += pick(kKorean[(k + (st >> 8) % 3) % 3], st);
      }
      return s + ".";
    }
    st = mix(st + kGolden);
    const std::uint32_t sentences = min_ + static_cast<std::uint32_t>((st >> 32) % span_);
    std::string out;
    for (std::uint32_t i = 0; i < sentences; ++i) {
      if (i) out += ' ';
      const std::string_view shape = pick(kShapes, st);
      std::string sentence;
      for (char c : shape) {
        switch (c) {
          case 'E': sentence += fill(pick(kEquipment, st)); break;
          case 'M': sentence += fill(pick(kMeasurement, st)); break;
          case 'A': sentence += pick(kAnomaly, st); break;
          case 'D': sentence += pick(kDecision, st); break;
          case 'R': sentence += fill(pick(kReturn, st)); break;
          default: sentence += c;
        }
      }
      sentence[0] = static_cast<char>(sentence[0] >= 'a' && sentence[0] <= 'z' ? sentence[0] - 32 : sentence[0]);
      out += sentence;
    }
    return out;
  }

  // Concurrent for distinct indices: reads only immutable members (the builder is per call).
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    if (max_reports == 0 || index >= (reports_ + max_reports - 1) / max_reports) return false;
    const std::uint64_t first = index * max_reports, n = std::min(max_reports, reports_ - first);
    ChunkBuilder cb;
    cb.reset(tk_.axes().size());
    for (std::uint64_t r = 0; r < n; ++r) {
      tk_.encode(text(first + r), cb.enc);
      if (cb.enc.ids.empty()) throw PluginError("report 'ops-text-" + std::to_string(first + r) + "': " + headsep_text::kNoTokenReason);
      cb.add(tk_, names_);
    }
    cb.write(out);
    if (names_)
      for (std::uint64_t r = 0; r < n; ++r) out.report_id("ops-text-" + std::to_string(first + r));
    return true;
  }

 private:
  Tokenizer tk_;
  bool names_ = false;
  double korean_ = 0.1;
  std::uint64_t reports_ = 0, key_ = 0;
  std::uint32_t min_ = 1, span_ = 3;
};

constexpr headsep_param_spec kParams[] = {
    {"reports", HEADSEP_PARAM_INT, "1000", "number of reports"},
    {"seed", HEADSEP_PARAM_INT, "1", "random seed: the same seed gives the same reports whatever the chunking"},
    {"min_sentences", HEADSEP_PARAM_INT, "1", "fewest sentences per report"},
    {"max_sentences", HEADSEP_PARAM_INT, "3", "most sentences per report"},
    {"korean", HEADSEP_PARAM_FLOAT, "0.1", "fraction of reports made of the seed's Korean tokens"},
    {"model", HEADSEP_PARAM_STRING, "", "model folder with vocab.txt (headsep run --model DIR passes it)"},
    {"max_tokens", HEADSEP_PARAM_INT, "0", "tokens per report incl. [CLS]/[SEP], longer ones truncated (0 = the model folder's truncation length, docs/MODEL.md)"},
    {"lexicon", HEADSEP_PARAM_STRING, "", "CSV word,AXIS1,... (empty = the built-in ops lexicon)"},
    {"names", HEADSEP_PARAM_BOOL, "false", "emit report ids (ops-text-<index>) and token names"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(OpsText, "ops-text", "0.1.0",
                        "Synthetic operations reports as text (equipment, measurement, anomaly, decision, return condition), deterministic per seed",
                        kParams)
