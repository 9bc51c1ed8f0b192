// ops-reports — synthetic operations reports modelled on the seed: each token is a decision,
// evidence or condition word with feature values on decision_axis / evidence_axis /
// condition_axis (its own axis high, the others low). Every value derives from (seed, report
// index, token index) through splitmix64, a counter-based generator, so chunk i is the same
// whatever the chunk size or the thread that generates it. No per-token allocation.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

// splitmix64's finaliser: a bijective 64-bit mix.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
// Uniform integer in [0, n) from 16 random bits (multiply-shift: no division).
constexpr std::uint32_t pick16(std::uint64_t bits16, std::uint32_t n) noexcept {
  return static_cast<std::uint32_t>(((bits16 & 0xffff) * n) >> 16);
}

// Feature values k/10 for k = 0..18, as the seed writes them (exact decimal parses).
constexpr std::array<double, 19> kTenths = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
                                            1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8};

constexpr std::string_view kVocab[3][8] = {
    {"정지결정", "보류결정", "차단작업", "재가동승인", "stop_decision", "hold_decision", "shutdown_order", "restart_approval"},
    {"압력이상", "진동기록", "잠금확인", "온도상승", "pressure_anomaly", "vibration_log", "lock_check", "temperature_rise"},
    {"복귀조건", "재가동조건", "예외조건", "분기조건", "return_condition", "restart_condition", "exception_clause", "branch_condition"},
};

class OpsReports final : public ScenarioGenerator {
 public:
  explicit OpsReports(const Params& p) {
    const auto reports = p.get_int("reports"), lo = p.get_int("min_tokens"), hi = p.get_int("max_tokens");
    if (reports < 0) throw PluginError("parameter 'reports' must be >= 0, got " + std::to_string(reports));
    if (lo < 1) throw PluginError("parameter 'min_tokens' must be >= 1, got " + std::to_string(lo));
    if (hi < lo || hi > 65536)
      throw PluginError("parameter 'max_tokens' must be in min_tokens..65536, got " + std::to_string(hi));
    reports_ = static_cast<std::uint64_t>(reports);
    min_ = static_cast<std::uint32_t>(lo);
    span_ = static_cast<std::uint32_t>(hi - lo + 1);
    key_ = mix(static_cast<std::uint64_t>(p.get_int("seed")) + kGolden);
    names_ = p.get_bool("names");
    const auto d = p.get_int("d_model");
    if (d < 0 || d > 4096) throw PluginError("parameter 'd_model' must be in 0..4096, got " + std::to_string(d));
    d_model_ = static_cast<std::uint32_t>(d);
    noise_ = p.get_double("noise");
    if (!(noise_ >= 0 && noise_ <= 100)) throw PluginError("parameter 'noise' must be in 0..100");
    // Each of the 24 vocabulary words gets a fixed embedding: uniform(-√3, √3) per dimension
    // (unit variance), drawn from (seed, word, dimension) so it does not depend on chunking.
    vocab_embedding_.resize(std::size_t(24) * d_model_);
    for (std::size_t wi = 0; wi < 24; ++wi)
      for (std::size_t j = 0; j < d_model_; ++j)
        vocab_embedding_[wi * d_model_ + j] = unit(mix(key_ ^ (0x5bd1e995ULL * (wi + 1)) ^ mix(j + 1)));
  }

  SchemaInfo schema() const override {
    SchemaInfo s;
    s.features = {"decision_axis", "evidence_axis", "condition_axis"};
    s.random_access = true;
    s.total_reports = reports_;
    s.d_model = d_model_;
    return s;
  }

  // Concurrent for distinct indices: reads only immutable members.
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    if (max_reports == 0 || index >= (reports_ + max_reports - 1) / max_reports) return false;
    const std::uint64_t first = index * max_reports;
    const std::uint64_t n = std::min(max_reports, reports_ - first);
    auto off = out.token_offsets(n);
    off[0] = 0;
    for (std::uint64_t r = 0; r < n; ++r) off[r + 1] = off[r] + length(report_hash(first + r));
    const std::uint64_t n_tokens = off[n];
    double* f[3] = {out.feature(0, n_tokens).data(), out.feature(1, n_tokens).data(), out.feature(2, n_tokens).data()};
    float* emb = d_model_ ? out.embeddings(n_tokens, d_model_).data() : nullptr;
    std::string id;
    for (std::uint64_t r = 0; r < n; ++r) {
      const std::uint64_t h = report_hash(first + r);
      const std::uint32_t rot = pick16(h >> 16, 3);
      const std::uint64_t t0 = off[r], len = off[r + 1] - t0;
      for (std::uint64_t i = 0; i < len; ++i) {
        const std::uint64_t b = mix(h + (i + 1) * 0xd1b54a32d192ed03ULL);
        // The first three tokens cover decision, evidence and condition (rotated), like the seed.
        const std::uint32_t c = i < 3 ? static_cast<std::uint32_t>((i + rot) % 3) : pick16(b, 3);
        const std::uint64_t t = t0 + i;
        const double main = kTenths[8 + pick16(b >> 16, 11)];                       // 0.8 .. 1.8
        const double lo1 = kTenths[pick16(b >> 32, 7)], lo2 = kTenths[pick16(b >> 48, 7)];  // 0.0 .. 0.6
        f[c][t] = main;
        f[(c + 1) % 3][t] = lo1;
        f[(c + 2) % 3][t] = lo2;
        if (names_) out.token_name(kVocab[c][(b >> 8) & 7]);
        if (emb) {
          // The word's embedding plus per-token noise (from (seed, report, token, dimension)).
          const float* e = &vocab_embedding_[(c * 8 + ((b >> 8) & 7)) * d_model_];
          float* x = emb + t * d_model_;
          const float k = static_cast<float>(noise_);
          for (std::uint32_t j = 0; j < d_model_; ++j) x[j] = e[j] + k * unit(mix(b + (j + 1) * kGolden));
        }
      }
      if (names_) {
        id = "ops-" + std::to_string(first + r);
        out.report_id(id);
      }
    }
    return true;
  }

 private:
  std::uint64_t report_hash(std::uint64_t r) const noexcept { return mix(key_ + (r + 1) * kGolden); }
  std::uint32_t length(std::uint64_t h) const noexcept {
    return min_ + static_cast<std::uint32_t>(((h >> 32) * span_) >> 32);
  }

  // Uniform in (-√3, √3) from 24 random bits: unit variance.
  static float unit(std::uint64_t bits) noexcept {
    return static_cast<float>((double((bits >> 40) & 0xffffff) + 0.5) / 16777216.0 * 3.4641016151377544 - 1.7320508075688772);
  }

  std::uint64_t reports_ = 0, key_ = 0;
  std::uint32_t min_ = 3, span_ = 4, d_model_ = 0;
  double noise_ = 0.1;
  std::vector<float> vocab_embedding_;  // [word][d_model]
  bool names_ = false;
};

constexpr headsep_param_spec kParams[] = {
    {"reports", HEADSEP_PARAM_INT, "1000", "number of reports to generate"},
    {"seed", HEADSEP_PARAM_INT, "1", "random seed: the same seed gives the same reports whatever the chunking"},
    {"min_tokens", HEADSEP_PARAM_INT, "3", "shortest report, in tokens"},
    {"max_tokens", HEADSEP_PARAM_INT, "6", "longest report, in tokens"},
    {"names", HEADSEP_PARAM_BOOL, "false", "emit report ids (ops-<index>) and token names (slower)"},
    {"d_model", HEADSEP_PARAM_INT, "0", "token embedding width for attention schemes (0 = none): a fixed random vector per vocabulary word plus noise"},
    {"noise", HEADSEP_PARAM_FLOAT, "0.1", "scale of the per-token noise added to each word's embedding (d_model > 0)"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(OpsReports, "ops-reports", "0.1.0",
                        "Synthetic operations reports: decision/evidence/condition tokens, deterministic per seed",
                        kParams)
