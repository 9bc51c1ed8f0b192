// The decoders' shared forward (model/weights.hpp, Decoder): input checks, groups of consecutive
// reports (about kGroupTokens tokens, products over the whole group), per layer the architecture's
// projections, the fused causal attention kernel per report (every head and the baseline
// measured), the architecture's rest of the layer; the final norm for the hidden states.
#include <cstring>

#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "model/weights.hpp"

namespace headsep::model {
namespace {
constexpr std::size_t kGroupTokens = 512;  ///< tokens per group of reports (a longer report alone)
}  // namespace

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
                      float* all_hidden) const {
  if (n_reports == 0) return;
  kernels::require_supported(level);
  const std::string& type = shape_.model_type;
  if (layers.size() != shape_.layers)
    throw Error(type + ": " + std::to_string(layers.size()) + " layer outputs for " + std::to_string(shape_.layers) +
                " layers");
  const std::size_t P = std::size_t(shape_.heads) * (shape_.heads - 1) / 2;
  for (const auto& o : layers)
    if (!o.head_stats || (axes && !o.context) || (P && !o.pair_stats) || o.stride < n_reports ||
        (o.maps && !o.maps_offset))
      throw Error(type + ": every layer output needs head_stats, context (with axes), pair_stats and stride >= reports");
  for (std::size_t r = 0; r < n_reports; ++r) {
    const std::uint64_t n = token_offset[r + 1] - token_offset[r];
    if (n > shape_.max_positions)
      throw Error(type + ": report " + std::to_string(r) + " has " + std::to_string(n) + " tokens, over the model's " +
                  std::to_string(shape_.max_positions) + " " + shape_.length_limit);
    for (std::uint64_t t = token_offset[r]; t < token_offset[r + 1]; ++t)
      if (ids[t] >= shape_.vocab_size)
        throw Error(type + ": token id " + std::to_string(ids[t]) + " is outside the vocabulary (" +
                    std::to_string(shape_.vocab_size) + " tokens)");
  }
  const std::size_t total = token_offset[n_reports] - token_offset[0];
  for (std::size_t r0 = 0; r0 < n_reports;) {
    std::size_t r1 = r0, tokens = 0;
    while (r1 < n_reports) {
      const std::size_t n = token_offset[r1 + 1] - token_offset[r1];
      if (r1 > r0 && tokens + n > kGroupTokens) break;
      tokens += n;
      ++r1;
    }
    const Group g{ids, token_offset, r0, r1, tokens, axes, axis, level};
    run_group(g, layers, hidden, all_hidden, total, token_offset[0], s);
    r0 = r1;
  }
}

void Decoder::run_group(const Group& g, const std::vector<AttentionOut>& layers, float* hidden, float* all_hidden,
                        std::size_t total, std::uint64_t base, ModelScratch& s) const {
  const std::size_t D = shape_.hidden, T = g.T, t0 = g.token_offset[g.r0] - base;
  s.x.resize(T * D);
  s.qkv.resize(T * qkv_ld() + kernels::kAttnMaxLanes);
  s.ctx.resize(T * std::size_t(shape_.heads) * shape_.head_dim);
  float* x = s.x.data();
  if (T) embed(g, x, s);
  if (all_hidden) std::memcpy(all_hidden + t0 * D, x, T * D * sizeof(float));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (T) project(g, l, x, s);
    attend(g, layers[l], s);  // empty reports: the kernel's zeros
    if (!T) continue;
    finish_layer(g, l, x, s);
    if (all_hidden && l + 1 < layers.size())
      std::memcpy(all_hidden + ((l + 1) * total + t0) * D, x, T * D * sizeof(float));
  }
  if (!T || (!hidden && !all_hidden)) return;
  final_norm(x, T);
  if (all_hidden) std::memcpy(all_hidden + (layers.size() * total + t0) * D, x, T * D * sizeof(float));
  if (hidden) std::memcpy(hidden + t0 * D, x, T * D * sizeof(float));
}

void Decoder::attend(const Group& g, const AttentionOut& o, ModelScratch& s) const {
  const std::size_t H = shape_.heads, dh = shape_.head_dim, H1 = H + 1, ld = qkv_ld(), W = H * dh;
  const std::uint64_t t0 = g.token_offset[g.r0];
  AttentionReport in;
  in.heads = static_cast<std::uint32_t>(H);
  in.ld = ld;
  in.q_col = cols_.data(), in.k_col = cols_.data() + H1, in.v_col = cols_.data() + 2 * H1;
  in.dk = cols_.data() + 3 * H1, in.dv = cols_.data() + 4 * H1;
  in.config.mask = MaskKind::causal;
  in.axes = g.axes;
  std::vector<const float*> ax(g.axes);
  in.axis = ax.data();
  for (std::size_t r = g.r0; r < g.r1; ++r) {
    const std::uint64_t b = g.token_offset[r];
    const std::size_t n = g.token_offset[r + 1] - b;
    in.n = static_cast<std::uint32_t>(n);
    in.qkv = s.qkv.data() + (b - t0) * ld;
    for (std::uint32_t c = 0; c < g.axes; ++c) ax[c] = g.axis[c] + b;
    s.heads_out.resize(n * W + 1);
    AttentionReportOut ro;
    ro.context = o.context ? o.context + r : nullptr;
    ro.head_stats = o.head_stats + r;
    ro.pair_stats = o.pair_stats ? o.pair_stats + r : nullptr;
    ro.stride = o.stride;
    ro.maps = o.maps ? o.maps + o.maps_offset[r] : nullptr;
    ro.head_out = s.heads_out.data();
    attention_report(in, ro, g.level, s.attention);
    // concat_h(O_h), heads 1..H: block h is n x dh (the baseline has none).
    const float* o1 = s.heads_out.data();
    float* c = s.ctx.data() + (b - t0) * W;
    for (std::size_t q = 0; q < n; ++q)
      for (std::size_t h = 0; h < H; ++h) std::memcpy(c + q * W + h * dh, o1 + (h * n + q) * dh, dh * sizeof(float));
  }
}

}  // namespace headsep::model
