// axis-focus — synthetic head designs: each head prefers one context axis.
//
// For a report with tokens t and a head h that prefers axis a_h with sharpness s_h:
//   z_h(t) = axis a_h of token t            (sum of coefficient x feature, as --axes defines)
//   w_h(t) = exp(s_h * (z_h(t) - max_t' z_h(t'))) / sum_t'' exp(s_h * (z_h(t'') - max_t' z_h(t')))
// i.e. a softmax over the report's tokens; s = 0 gives uniform weights, large s puts all weight
// on the token strongest on that axis. The single-head baseline is the same softmax over the
// mean of all axes, with sharpness single_sharpness: one head compromising between relations.
// A design (scenario) lists one axis@sharpness per head; all designs have the same head count.
// This file: the plugin (its parameters, the rows each scenario asks for); designs.cpp parses
// the parameters, weights_kernel.cpp computes the weights.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "designs.hpp"
#include "headsep/plugin_sdk.hpp"
#include "weights_kernel.hpp"

namespace {

using namespace headsep::sdk;
using namespace axis_focus;

class AxisFocus final : public WeightingScheme {
 public:
  AxisFocus(const Params& p, const SchemaView& s) {
    axes_ = parse_axes(p.get_string("axes"), s);
    single_sharpness_ = p.get_double("single_sharpness");
    const double default_sharpness = p.get_double("sharpness");
    designs_ = parse_designs(p.get_string("designs"), axes_, default_sharpness);
    plan_terms();
    plan_rows();
    lanes_ = used_.size() <= kMaxUsed && axes_.size() <= kMaxAxes && designs_[0].heads.size() + 1 <= kMaxRows;
    run_ = select_kernel();  // reads HEADSEP_SIMD (weights_kernel.hpp)
  }

  std::uint32_t heads() const override { return static_cast<std::uint32_t>(designs_[0].heads.size()); }
  std::vector<std::string> scenarios() const override {
    std::vector<std::string> v;
    for (const auto& d : designs_) v.push_back(d.name);
    return v;
  }
  bool shared_baseline() const override { return true; }
  // Every design in one pass (HEADSEP_SLOT_ALL): the features are read and the axes summed once
  // for all designs' rows, not once per design.
  bool all_slots() const override { return true; }

  // Concurrent: reads only immutable members; per-call state lives on the stack.
  void weights(const BatchView& b, std::uint32_t slot, double* const* rows) const override {
    const std::uint32_t per_slot = heads() + 1;
    if (slot == HEADSEP_SLOT_ALL) {
      if (all_src_.size() > kMaxRows || 1 + designs_.size() * (per_slot - 1) > kMaxRows) {  // too many rows for one lane pass: design by design
        for (std::uint32_t d = 0; d < designs_.size(); ++d) weights(b, d, rows + std::size_t(d) * per_slot);
        return;
      }
      // Distinct (axis, sharpness) rows once (designs often share a head); copies for the rest.
      double* out[kMaxRows];
      std::uint32_t k = 0;
      out[k++] = rows[0];  // the baseline, shared: rows[d * per_slot] is NULL for d > 0
      for (std::uint32_t d = 0; d < designs_.size(); ++d)
        for (std::uint32_t h = 1; h < per_slot; ++h) out[k++] = rows[std::size_t(d) * per_slot + h];
      double* distinct[kMaxRows];
      for (std::uint32_t i = 0; i < all_distinct_.size(); ++i) distinct[i] = out[all_distinct_[i]];
      run(b, all_src_.data(), all_sharp_.data(), distinct, static_cast<std::uint32_t>(all_distinct_.size()));
      const std::size_t bytes = b.n_tokens() * sizeof(double);
      for (const auto& [to, from] : all_copies_) std::memcpy(out[to], out[from], bytes);
      return;
    }
    if (slot >= designs_.size()) throw PluginError("scenario slot out of range");
    // Row 0, the baseline, is the same softmax in every design: the host asks for it in slot 0 only.
    const std::uint32_t skip = rows[0] ? 0 : 1;
    run(b, src_[slot].data() + skip, sharp_[slot].data() + skip, rows + skip,
        static_cast<std::uint32_t>(src_[slot].size()) - skip);
  }

 private:
  // Rows out[0..n_rows): row i the softmax of axis src[i] (n_axes = the mean) with sharpness sharp[i].
  void run(const BatchView& b, const std::uint32_t* src, const double* sharp, double* const* out, std::uint32_t n_rows) const {
    Ctx c;
    c.n_axes = static_cast<std::uint32_t>(axes_.size());
    c.n_used = static_cast<std::uint32_t>(used_.size());
    if (lanes_)
      for (std::uint32_t u = 0; u < c.n_used; ++u) c.feat[u] = b.feature(used_[u]).data();
    c.columns = b.raw()->features;
    c.used = used_.data();
    c.term_begin = term_begin_.data();
    c.term_slot = term_slot_.data();
    c.term_k = term_k_.data();
    c.inv_axes = 1.0 / static_cast<double>(c.n_axes);
    c.rows = n_rows;
    c.src = src;
    c.sharp = sharp;
    c.out = out;
    run_(c, b.token_offset().data(), b.n_reports(), lanes_);
  }

  // Flattened plan: distinct feature columns (slots), each axis's terms.
  void plan_terms() {
    for (const auto& a : axes_) {
      term_begin_.push_back(static_cast<std::uint32_t>(term_slot_.size()));
      for (const auto& [feature, k] : a.terms) {
        std::uint32_t slot = 0;
        while (slot < used_.size() && used_[slot] != feature) ++slot;
        if (slot == used_.size()) used_.push_back(feature);
        term_slot_.push_back(slot);
        term_k_.push_back(k);
      }
    }
    term_begin_.push_back(static_cast<std::uint32_t>(term_slot_.size()));
  }

  // Each design's rows, and every design at once.
  void plan_rows() {
    std::vector<std::uint32_t> every_src{static_cast<std::uint32_t>(axes_.size())};
    std::vector<double> every_sharp{single_sharpness_};
    for (const auto& d : designs_) {
      std::vector<std::uint32_t> src{static_cast<std::uint32_t>(axes_.size())};
      std::vector<double> sharp{single_sharpness_};
      for (const auto& h : d.heads) {
        src.push_back(h.axis), sharp.push_back(h.sharpness);
        every_src.push_back(h.axis), every_sharp.push_back(h.sharpness);
      }
      src_.push_back(std::move(src));
      sharp_.push_back(std::move(sharp));
    }
    // Every design at once: each distinct (axis, sharpness) computed once (same bits: the same
    // operations on the same inputs), the repeats copied from their first occurrence.
    for (std::uint32_t i = 0; i < every_src.size(); ++i) {
      std::uint32_t first = 0;
      while (first < i && !(every_src[first] == every_src[i] && std::bit_cast<std::uint64_t>(every_sharp[first]) ==
                                                                    std::bit_cast<std::uint64_t>(every_sharp[i])))
        ++first;
      if (first < i) {
        all_copies_.emplace_back(i, first);
      } else {
        all_distinct_.push_back(i);
        all_src_.push_back(every_src[i]);
        all_sharp_.push_back(every_sharp[i]);
      }
    }
  }

  std::vector<Axis> axes_;
  std::vector<Design> designs_;
  double single_sharpness_ = 1.0;
  std::vector<std::uint32_t> used_, term_begin_, term_slot_;  // see Ctx
  std::vector<double> term_k_;
  std::vector<std::vector<std::uint32_t>> src_;  // per design: row -> axis (axes_.size() = the mean)
  std::vector<std::vector<double>> sharp_;       // per design: row -> sharpness
  // Every design at once: output k = 0 the baseline, then each design's heads in order;
  // all_distinct_[i] = the output distinct row i fills (axis all_src_[i], sharpness all_sharp_[i]),
  // all_copies_ = (output, output it copies).
  std::vector<std::uint32_t> all_src_, all_distinct_;
  std::vector<double> all_sharp_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> all_copies_;
  bool lanes_ = true;
  Kernel run_ = nullptr;
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
