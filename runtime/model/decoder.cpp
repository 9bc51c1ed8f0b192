// The decoders' shared forward (model/weights.hpp, Decoder): input checks, groups of consecutive
// reports (about 512 tokens, products over the whole group), per layer the architecture's
// projections, the fused causal attention kernel per report (every head and the baseline
// measured), the architecture's rest of the layer; the final norm for the hidden states.
#include <cstring>

#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "model/weights.hpp"

namespace headsep::model {

void Decoder::set_heads() {
  const std::uint32_t H = shape_.heads, dh = shape_.head_dim, H1 = H + 1;
  cols_.assign(5 * std::size_t(H1), 0);
  for (std::uint32_t h = 0; h <= H; ++h) {
    cols_[h] = h ? (h - 1) * dh : 0;
    cols_[H1 + h] = H * dh + (h ? (h - 1) * dh : 0);
    cols_[2 * H1 + h] = 2 * H * dh + (h ? shape_.kv_head(h) * dh : 0);
    cols_[3 * H1 + h] = h ? dh : H * dh;  // the baseline: width H·dh, scale 1/√(H·dh)
    cols_[4 * H1 + h] = h ? dh : 0;       // its map is measured, its output unused: no A·V
  }
}

double Decoder::flops(const std::uint64_t* token_offset, std::size_t n_reports) const noexcept {
  const double qk = double(shape_.heads) * shape_.head_dim;
  double f = 0;
  for (std::size_t r = 0; r < n_reports; ++r) {
    const double n = double(token_offset[r + 1] - token_offset[r]);
    f += 2.0 * n * layer_macs() + 2.0 * n * (n + 1) / 2 * 2 * qk;  // causal: n(n+1)/2 scores and A·V terms
  }
  return f * shape_.layers;
}

void Decoder::forward(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t n_reports,
                      std::uint32_t axes, const float* const* axis, SimdLevel level,
                      const std::vector<AttentionOut>& layers, float* hidden, ModelScratch& s,
                      float* all_hidden, const DirectionAxes* directions) const {
  if (n_reports == 0) return;
  kernels::require_supported(level);
  check_forward(shape_, ids, token_offset, n_reports, axes, layers, directions);
  const std::size_t total = token_offset[n_reports] - token_offset[0];
  run_groups(*group_pool_, token_offset, n_reports, s,
             [&](std::size_t r0, std::size_t r1, std::size_t tokens, ModelScratch& gs) {
               const Group g{ids, token_offset, r0, r1, tokens, axes, axis, level, directions};
               run_group(g, layers, hidden, all_hidden, total, token_offset[0], gs);
             });
}

void Decoder::run_group(const Group& g, const std::vector<AttentionOut>& layers, float* hidden, float* all_hidden,
                        std::size_t total, std::uint64_t base, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T, t0 = g.token_offset[g.r0] - base;
  s.x.resize(T * D);
  s.qkv.resize(T * qkv_ld() + kernels::kAttnMaxLanes);
  s.ctx.resize(T * std::size_t(shape_.heads) * shape_.head_dim);
  float* x = s.x.data();
  s.clock.to(ForwardPart::embed);
  if (T) embed(g, x, s);
  if (all_hidden) std::memcpy(all_hidden + t0 * D, x, T * D * sizeof(float));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (T) project(g, l, x, s);
    // Empty reports: the kernel's zeros.
    AttentionReport view = rows_view(shape_.heads, qkv_ld(), cols_, MaskKind::causal, g.axes);
    view.config.window = shape_.sliding_window.empty() ? 0 : shape_.sliding_window[l];  // the baseline's too
    view.config.softcap = shape_.attn_softcap;
    s.clock.to(ForwardPart::attention);
    attend_reports(view, g.token_offset, g.r0, g.r1, s.qkv.data(), g.axis, layers[l], g.level, shape_.head_dim,
                   s.ctx.data(), s, {g.directions, l, x, D});
    if (!T) continue;
    finish_layer(g, l, x, s);
    s.clock.to(ForwardPart::residual);  // (the copies of the hidden states)
    if (all_hidden && l + 1 < layers.size())
      std::memcpy(all_hidden + ((l + 1) * total + t0) * D, x, T * D * sizeof(float));
  }
  if (!T || (!hidden && !all_hidden)) return;
  s.clock.to(ForwardPart::norm);
  final_norm(x, T);
  s.clock.to(ForwardPart::residual);
  if (all_hidden) std::memcpy(all_hidden + (layers.size() * total + t0) * D, x, T * D * sizeof(float));
  if (hidden) std::memcpy(hidden + t0 * D, x, T * D * sizeof(float));
}

}  // namespace headsep::model
