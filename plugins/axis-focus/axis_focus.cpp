// axis-focus — synthetic head designs: each head prefers one context axis.
//
// For a report with tokens t and a head h that prefers axis a_h with sharpness s_h:
//   z_h(t) = axis a_h of token t            (sum of coefficient x feature, as --axes defines)
//   w_h(t) = exp(s_h * (z_h(t) - max_t' z_h(t'))) / sum_t'' exp(s_h * (z_h(t'') - max_t' z_h(t')))
// i.e. a softmax over the report's tokens; s = 0 gives uniform weights, large s puts all weight
// on the token strongest on that axis. The single-head baseline is the same softmax over the
// mean of all axes, with sharpness single_sharpness: one head compromising between relations.
// A design (scenario) lists one axis@sharpness per head; all designs have the same head count.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/plugin_sdk.hpp"

namespace {

using namespace headsep::sdk;

struct Head {
  std::uint32_t axis;
  double sharpness;
};
struct Design {
  std::string name;
  std::vector<Head> heads;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (;;) {
    auto j = s.find(sep, i);
    out.push_back(trim(s.substr(i, j == std::string::npos ? std::string::npos : j - i)));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

// Context axes in --axes syntax: "name=[k*]col(+|-)[k*]col;...", bound to feature indices.
struct Axis {
  std::string name;
  std::vector<std::pair<std::uint32_t, double>> terms;  // (feature, coefficient)
};

std::vector<Axis> parse_axes(const std::string& spec, const SchemaView& schema) {
  std::vector<Axis> out;
  for (const auto& part : split(spec, ';')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0) throw PluginError("parameter 'axes': '" + part + "' is not name=column+...");
    Axis a{trim(part.substr(0, eq)), {}};
    const std::string rhs = part.substr(eq + 1);
    std::size_t i = 0;
    while (i < rhs.size()) {
      double sign = 1.0;
      while (i < rhs.size() && (rhs[i] == ' ' || rhs[i] == '+' || rhs[i] == '-')) sign = rhs[i++] == '-' ? -sign : sign;
      std::size_t j = i;  // a term ends at + or - that is not an exponent's sign
      while (j < rhs.size() && rhs[j] != '+' &&
             !(rhs[j] == '-' && j > i && rhs[j - 1] != 'e' && rhs[j - 1] != 'E' && rhs[j - 1] != '*'))
        ++j;
      std::string term = trim(rhs.substr(i, j - i));
      double k = 1.0;
      if (auto star = term.find('*'); star != std::string::npos) {
        std::string num = trim(term.substr(0, star));
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), k);
        if (ec != std::errc() || p != num.data() + num.size())
          throw PluginError("parameter 'axes': bad coefficient '" + num + "' in axis '" + a.name + "'");
        term = trim(term.substr(star + 1));
      }
      if (term.empty()) throw PluginError("parameter 'axes': empty term in axis '" + a.name + "'");
      a.terms.emplace_back(schema.feature_index(term), sign * k);
      i = j;
    }
    if (a.terms.empty()) throw PluginError("parameter 'axes': axis '" + a.name + "' has no columns");
    out.push_back(std::move(a));
  }
  if (out.empty()) throw PluginError("parameter 'axes' defines no axis");
  return out;
}

class AxisFocus final : public WeightingScheme {
 public:
  AxisFocus(const Params& p, const SchemaView& s) {
    axes_ = parse_axes(p.get_string("axes"), s);
    single_sharpness_ = p.get_double("single_sharpness");
    const double default_sharpness = p.get_double("sharpness");
    for (const auto& item : split(p.get_string("designs"), ';')) {
      if (item.empty()) continue;
      auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw PluginError("parameter 'designs': '" + item + "' is not name=axis[@sharpness],axis[@sharpness],...");
      Design d{trim(item.substr(0, eq)), {}};
      for (const auto& h : split(item.substr(eq + 1), ',')) {
        auto at = h.find('@');
        std::string axis = trim(h.substr(0, at));
        double sharp = default_sharpness;
        if (at != std::string::npos) {
          std::string v = trim(h.substr(at + 1));
          char* end = nullptr;
          sharp = std::strtod(v.c_str(), &end);
          if (v.empty() || *end || !std::isfinite(sharp))
            throw PluginError("parameter 'designs': design '" + d.name + "': sharpness '" + v + "' is not a number");
        }
        d.heads.push_back({axis_index(axis, d.name), sharp});
      }
      if (!designs_.empty() && d.heads.size() != designs_[0].heads.size())
        throw PluginError("parameter 'designs': design '" + d.name + "' has " + std::to_string(d.heads.size()) +
                          " heads but '" + designs_[0].name + "' has " + std::to_string(designs_[0].heads.size()) +
                          " (every design needs the same number of heads)");
      designs_.push_back(std::move(d));
    }
    if (designs_.empty()) throw PluginError("parameter 'designs' defines no design");
  }

  std::uint32_t heads() const override { return static_cast<std::uint32_t>(designs_[0].heads.size()); }
  std::vector<std::string> scenarios() const override {
    std::vector<std::string> v;
    for (const auto& d : designs_) v.push_back(d.name);
    return v;
  }

  void weights(const BatchView& b, std::uint32_t slot, double* const* rows) const override {
    if (slot >= designs_.size()) throw PluginError("scenario slot out of range");
    const auto& d = designs_[slot];
    const std::size_t n = b.n_tokens(), C = axes_.size();
    // Per-thread scratch: weights() runs on several threads at once, and must not allocate per call.
    thread_local std::vector<double> scratch;
    scratch.resize((C + 1) * n);
    double* const z0 = scratch.data() + C * n;
    std::fill(z0, z0 + n, 0.0);
    for (std::size_t c = 0; c < C; ++c) {
      double* zc = scratch.data() + c * n;
      project(b, static_cast<std::uint32_t>(c), zc);
      for (std::size_t t = 0; t < n; ++t) z0[t] += zc[t];
    }
    const double inv = 1.0 / static_cast<double>(C);
    for (std::size_t t = 0; t < n; ++t) z0[t] *= inv;
    softmax(b, z0, single_sharpness_, rows[0]);
    for (std::size_t h = 0; h < d.heads.size(); ++h)
      softmax(b, scratch.data() + d.heads[h].axis * n, d.heads[h].sharpness, rows[h + 1]);
  }

 private:
  std::uint32_t axis_index(const std::string& name, const std::string& design) const {
    for (std::uint32_t c = 0; c < axes_.size(); ++c)
      if (axes_[c].name == name) return c;
    std::string have;
    for (const auto& a : axes_) have += (have.empty() ? "" : ", ") + a.name;
    throw PluginError("parameter 'designs': design '" + design + "' names axis '" + name + "'; axes: " + have);
  }

  void project(const BatchView& b, std::uint32_t c, double* out) const {
    const std::size_t n = b.n_tokens();
    std::fill(out, out + n, 0.0);
    for (const auto& [feature, k] : axes_[c].terms) {
      const double* f = b.feature(feature).data();
      for (std::size_t t = 0; t < n; ++t) out[t] += k * f[t];
    }
  }

  // exp(x) for x <= 0 in plain arithmetic the compiler vectorises: x = k ln2 + r, |r| <= ln2/2,
  // exp(r) by a degree-12 Taylor polynomial (relative error < 1e-15), 2^k through the exponent
  // bits. Needs -708 <= x <= 0 (the caller clamps: weights below ~1e-308 are zero in effect; the
  // clamp lives in the caller's scalar loop because a compare here would stop vectorisation).
  [[gnu::always_inline]] static inline double exp_nonpositive(double x) noexcept {
    constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 0.6931471803691238, kLn2Lo = 1.9082149292705877e-10;
    const double t = x * kLog2e + kShift;
    const double k = t - kShift;
    const double r = (x - k * kLn2Hi) - k * kLn2Lo;
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const std::int64_t ki = std::bit_cast<std::int64_t>(t) - std::bit_cast<std::int64_t>(kShift);
    return p * std::bit_cast<double>((ki + 1023) << 52);
  }

  // The hot loop, cloned for AVX2 (picked at load time). Without FMA contraction both clones do
  // the same IEEE operations, so results do not depend on the machine.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
  [[gnu::target_clones("avx2", "default")]]
#endif
  static void exp_inplace(double* w, std::size_t n) {
    for (std::size_t t = 0; t < n; ++t) w[t] = exp_nonpositive(w[t]);
  }

  // w = softmax over each report's tokens of s * z, shifted by the report's maximum for range.
  static void softmax(const BatchView& b, const double* z, double s, double* w) {
    auto off = b.token_offset();
    const std::size_t n = b.n_tokens(), R = b.n_reports();
    for (std::size_t t = 0; t < n; ++t) w[t] = s * z[t];
    for (std::size_t r = 0; r < R; ++r) {
      const auto lo = off[r], hi = off[r + 1];
      if (lo == hi) continue;
      double m = w[lo];
      for (auto t = lo + 1; t < hi; ++t) m = w[t] > m ? w[t] : m;
      for (auto t = lo; t < hi; ++t) {
        const double x = w[t] - m;
        w[t] = x < -708.0 ? -708.0 : x;
      }
    }
    exp_inplace(w, n);
    for (std::size_t r = 0; r < R; ++r) {
      const auto lo = off[r], hi = off[r + 1];
      double sum = 0;
      for (auto t = lo; t < hi; ++t) sum += w[t];
      const double inv = 1.0 / sum;
      for (auto t = lo; t < hi; ++t) w[t] *= inv;
    }
  }

  std::vector<Axis> axes_;
  std::vector<Design> designs_;
  double single_sharpness_ = 1.0;
};

constexpr headsep_param_spec kParams[] = {
    {"designs", HEADSEP_PARAM_STRING,
     "balanced_heads=decision_axis@0.5,evidence_condition_axis@0.5;"
     "decision_vs_condition_split=decision_axis@4,evidence_condition_axis@4;"
     "condition_heavy_both_heads=evidence_condition_axis@2,evidence_condition_axis@4",
     "scenarios, ';'-separated: name=axis[@sharpness],... with one axis per head (same head count in every design)"},
    {"axes", HEADSEP_PARAM_STRING, "decision_axis=decision_axis;evidence_condition_axis=evidence_axis+condition_axis",
     "the axes heads may prefer, in --axes syntax (name=[k*]column+...;...)"},
    {"sharpness", HEADSEP_PARAM_FLOAT, "3", "sharpness of a head whose design gives none"},
    {"single_sharpness", HEADSEP_PARAM_FLOAT, "1", "sharpness of the single-head baseline (softmax over the mean of all axes)"},
};

}  // namespace

HEADSEP_WEIGHTING_PLUGIN(AxisFocus, "axis-focus", "0.1.0",
                         "Synthetic head designs: each head a softmax over tokens of one preferred axis", kParams)
