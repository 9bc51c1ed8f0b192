// axis-focus — synthetic head designs: each head prefers one context axis.
//
// For a report with tokens t and a head h that prefers axis a_h with sharpness s_h:
//   z_h(t) = axis a_h of token t            (sum of coefficient x feature, as --axes defines)
//   w_h(t) = exp(s_h * (z_h(t) - max_t' z_h(t'))) / sum_t'' exp(s_h * (z_h(t'') - max_t' z_h(t')))
// i.e. a softmax over the report's tokens; s = 0 gives uniform weights, large s puts all weight
// on the token strongest on that axis. The single-head baseline is the same softmax over the
// mean of all axes, with sharpness single_sharpness: one head compromising between relations.
// A design (scenario) lists one axis@sharpness per head; all designs have the same head count.
#include <cmath>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
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

class AxisFocus final : public WeightingScheme {
 public:
  AxisFocus(const Params& p, const SchemaView& s) {
    try {
      axes_ = headsep::AxisMap::bind(headsep::parse_axes(p.get_string("axes")), s.features);
    } catch (const std::exception& e) {
      throw PluginError(std::string("parameter 'axes': ") + e.what());
    }
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
    const std::size_t n = b.n_tokens();
    std::vector<double> z(n), tmp(n);
    // Baseline: mean of all axes.
    std::fill(z.begin(), z.end(), 0.0);
    for (std::uint32_t c = 0; c < axes_.size(); ++c) {
      project(b, c, tmp.data());
      for (std::size_t t = 0; t < n; ++t) z[t] += tmp[t];
    }
    const double inv = 1.0 / static_cast<double>(axes_.size());
    for (std::size_t t = 0; t < n; ++t) z[t] *= inv;
    softmax(b, z.data(), single_sharpness_, rows[0]);
    for (std::size_t h = 0; h < d.heads.size(); ++h) {
      project(b, d.heads[h].axis, z.data());
      softmax(b, z.data(), d.heads[h].sharpness, rows[h + 1]);
    }
  }

 private:
  std::uint32_t axis_index(const std::string& name, const std::string& design) const {
    for (std::uint32_t c = 0; c < axes_.size(); ++c)
      if (axes_.axes[c].name == name) return c;
    std::string have;
    for (const auto& a : axes_.axes) have += (have.empty() ? "" : ", ") + a.name;
    throw PluginError("parameter 'designs': design '" + design + "' names axis '" + name + "'; axes: " + have);
  }

  void project(const BatchView& b, std::uint32_t c, double* out) const {
    const std::size_t n = b.n_tokens();
    std::fill(out, out + n, 0.0);
    for (const auto& term : axes_.axes[c].terms) {
      const double* f = b.feature(term.feature).data();
      const double k = term.coefficient;
      for (std::size_t t = 0; t < n; ++t) out[t] += k * f[t];
    }
  }

  static void softmax(const BatchView& b, const double* z, double s, double* w) {
    auto off = b.token_offset();
    for (std::size_t r = 0; r < b.n_reports(); ++r) {
      const auto lo = off[r], hi = off[r + 1];
      if (lo == hi) continue;
      double m = z[lo];
      for (auto t = lo + 1; t < hi; ++t) m = std::max(m, z[t]);
      double sum = 0;
      for (auto t = lo; t < hi; ++t) sum += (w[t] = std::exp(s * (z[t] - m)));
      const double inv = 1.0 / sum;
      for (auto t = lo; t < hi; ++t) w[t] *= inv;
    }
  }

  headsep::AxisMap axes_;
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
