// Layers the architectures share (headsep/architecture.hpp): LayerNorm (BERT, GPT-2) with its
// vector levels, RMSNorm (Llama), the GELUs (BERT's erf, GPT-2's tanh) and SwiGLU (Llama); and
// the forward passes' shared steps (model/weights.hpp): input checks, the attention per report.
#include <cmath>
#include <cstddef>
#include <cstring>

#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "kernels/gelu.hpp"
#include "kernels/sigmoid.hpp"
#include "model/weights.hpp"

namespace headsep {
namespace {

/// The vector levels' LayerNorm (layer_norm_rows): the row's sums in 8 interleaved double partial
/// sums (lane j takes elements i ≡ j mod 8, combined as a tree), one vector of 8 doubles (a zmm on
/// AVX-512), where the reference's single chain cannot be reordered. R rows at a time, each with
/// its own sums (the same bits as one at a time): one row's sums are a chain of d/8 dependent
/// adds, and R chains overlap their latencies (MiniLM's LayerNorm 2.2 -> 1.8 % of its forward,
/// Xeon). Inlined into one function per instruction set (target attributes, as
/// gelu_inplace's clones), so no copy compiled with AVX flags is ever shared with baseline code.
using v8f = float __attribute__((vector_size(32)));
using v8d = double __attribute__((vector_size(64)));

template <std::size_t R>
[[gnu::always_inline]] inline void layer_norm_block(float* x, const float* residual, std::size_t d, const float* g,
                                                    const float* b, double eps) noexcept {
  v8d s[R] = {}, v[R] = {};
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8)  // the residual added on the way (the same float add as a pass of its own)
    for (std::size_t r = 0; r < R; ++r) {
      v8f xv;
      std::memcpy(&xv, x + r * d + i, sizeof xv);
      if (residual) {
        v8f rv;
        std::memcpy(&rv, residual + r * d + i, sizeof rv);
        xv += rv;
        std::memcpy(x + r * d + i, &xv, sizeof xv);
      }
      s[r] += __builtin_convertvector(xv, v8d);
    }
  for (std::size_t j = 0; i < d; ++i, ++j)
    for (std::size_t r = 0; r < R; ++r) {
      if (residual) x[r * d + i] += residual[r * d + i];
      s[r][j] += x[r * d + i];
    }
  const auto tree = [](const v8d& t) { return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7])); };
  double mean[R];
  for (std::size_t r = 0; r < R; ++r) mean[r] = tree(s[r]) / double(d);
  for (i = 0; i + 8 <= d; i += 8)
    for (std::size_t r = 0; r < R; ++r) {
      v8f xv;
      std::memcpy(&xv, x + r * d + i, sizeof xv);
      const v8d c = __builtin_convertvector(xv, v8d) - mean[r];
      v[r] += c * c;
    }
  for (std::size_t j = 0; i < d; ++i, ++j)
    for (std::size_t r = 0; r < R; ++r) {
      const double c = x[r * d + i] - mean[r];
      v[r][j] += c * c;
    }
  for (std::size_t r = 0; r < R; ++r) {
    const float inv = static_cast<float>(1.0 / std::sqrt(tree(v[r]) / double(d) + eps));
    const float m = static_cast<float>(mean[r]);
    float* row = x + r * d;
    for (i = 0; i < d; ++i) row[i] = (row[i] - m) * inv * g[i] + b[i];
  }
}

[[gnu::always_inline]] inline void layer_norm_body(float* x, const float* residual, std::size_t rows, std::size_t d,
                                                   const float* g, const float* b, double eps) noexcept {
  constexpr std::size_t kRows = 4;
  std::size_t r = 0;
  for (; r + kRows <= rows; r += kRows)
    layer_norm_block<kRows>(x + r * d, residual ? residual + r * d : nullptr, d, g, b, eps);
  for (; r < rows; ++r) layer_norm_block<1>(x + r * d, residual ? residual + r * d : nullptr, d, g, b, eps);
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"))) void layer_norm_avx512(
    float* x, const float* res, std::size_t rows, std::size_t d, const float* g, const float* b, double eps) noexcept {
  layer_norm_body(x, res, rows, d, g, b, eps);
}
__attribute__((target("avx2,fma"))) void layer_norm_avx2(float* x, const float* res, std::size_t rows, std::size_t d,
                                                         const float* g, const float* b, double eps) noexcept {
  layer_norm_body(x, res, rows, d, g, b, eps);
}
#endif

}  // namespace

void layer_norm_rows(SimdLevel level, float* x, const float* residual, std::size_t rows, std::size_t d, const float* g,
                     const float* b, double eps) {
  kernels::require_supported(level);
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512: return layer_norm_avx512(x, residual, rows, d, g, b, eps);
    case SimdLevel::avx2: return layer_norm_avx2(x, residual, rows, d, g, b, eps);
#endif
    case SimdLevel::scalar: break;
    default: return layer_norm_body(x, residual, rows, d, g, b, eps);  // SSE2: the baseline's vectors
  }
  // Reference: one sequential chain per sum.
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    if (residual)
      for (std::size_t i = 0; i < d; ++i) row[i] += residual[r * d + i];
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += row[i];
    const double mean = s / double(d);
    double v = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const double c = row[i] - mean;
      v += c * c;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(v / double(d) + eps));
    const float m = static_cast<float>(mean);
    for (std::size_t i = 0; i < d; ++i) row[i] = (row[i] - m) * inv * g[i] + b[i];
  }
}

// The rational erf of kernels/gelu.hpp, branch-free so the loop vectorises; one clone per
// instruction set. The forward fuses GELU into the FFN product (project_rows' gelu epilogue).
__attribute__((target_clones("avx512f", "avx2", "default"))) void gelu_inplace(float* v, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) v[i] = kernels::gelu_ref(v[i]);
}

void rms_norm_rows(const float* x, float* y, std::size_t rows, std::size_t d, const float* g, double eps) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* in = x + r * d;
    float* out = y + r * d;
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += double(in[i]) * in[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(s / double(d) + eps));
    for (std::size_t i = 0; i < d; ++i) out[i] = g[i] * (in[i] * inv);
  }
}

// kernels/sigmoid.hpp's branch-free e^x, so the loops vectorise (one clone per instruction set,
// the same bits in each): with libm's tanhf they were a quarter of a GPT-2 forward.
__attribute__((target_clones("avx512f", "avx2", "default"))) void gelu_tanh_inplace(float* v, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) v[i] = kernels::gelu_tanh_ref(v[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void swiglu_rows(const float* gu, float* out,
                                                                              std::size_t rows, std::size_t n) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* g = gu + r * 2 * n;
    const float* u = g + n;
    float* o = out + r * n;
    for (std::size_t i = 0; i < n; ++i) o[i] = kernels::times_sigmoid(g[i], g[i]) * u[i];
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void geglu_rows(bool tanh, const float* gu, float* out,
                                                                             std::size_t rows, std::size_t n) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* g = gu + r * 2 * n;
    const float* u = g + n;
    float* o = out + r * n;
    if (tanh)
      for (std::size_t i = 0; i < n; ++i) o[i] = kernels::gelu_tanh_ref(g[i]) * u[i];
    else
      for (std::size_t i = 0; i < n; ++i) o[i] = kernels::gelu_ref(g[i]) * u[i];
  }
}

Architecture::Architecture() : group_pool_(std::make_shared<model::GroupPool>()) {}
Architecture::~Architecture() = default;

namespace model {

void check_forward(const ModelShape& shape, const std::uint32_t* ids, const std::uint64_t* token_offset,
                   std::size_t n_reports, std::uint32_t axes, const std::vector<AttentionOut>& layers,
                   const DirectionAxes* directions) {
  const std::string& type = shape.model_type;
  if (directions && directions->count && (directions->count > axes || !directions->u))
    throw Error(type + ": " + std::to_string(directions->count) + " direction axes among " + std::to_string(axes) +
                " axes, or no directions");
  if (layers.size() != shape.layers)
    throw Error(type + ": " + std::to_string(layers.size()) + " layer outputs for " + std::to_string(shape.layers) +
                " layers");
  const std::size_t P = std::size_t(shape.heads) * (shape.heads - 1) / 2;
  for (const auto& o : layers)
    if (!o.head_stats || (axes && !o.context) || (P && !o.pair_stats) || o.stride < n_reports ||
        (o.maps && !o.maps_offset))
      throw Error(type + ": every layer output needs head_stats, context (with axes), pair_stats and stride >= reports");
  for (std::size_t r = 0; r < n_reports; ++r) {
    const std::uint64_t n = token_offset[r + 1] - token_offset[r];
    if (n > shape.max_positions)
      throw Error(type + ": report " + std::to_string(r) + " has " + std::to_string(n) + " tokens, over the model's " +
                  std::to_string(shape.max_positions) + " positions");
    for (std::uint64_t t = token_offset[r]; t < token_offset[r + 1]; ++t)
      if (ids[t] >= shape.vocab_size)
        throw Error(type + ": token id " + std::to_string(ids[t]) + " is outside the vocabulary (" +
                    std::to_string(shape.vocab_size) + " tokens)");
  }
}

AttentionReport rows_view(std::uint32_t heads, std::size_t ld, const std::vector<std::uint32_t>& cols, MaskKind mask,
                          std::uint32_t axes) {
  const std::size_t H1 = std::size_t(heads) + 1;
  AttentionReport in;
  in.heads = heads;
  in.ld = ld;
  in.q_col = cols.data(), in.k_col = cols.data() + H1, in.v_col = cols.data() + 2 * H1;
  in.dk = cols.data() + 3 * H1, in.dv = cols.data() + 4 * H1;
  in.config.mask = mask;
  in.axes = axes;
  return in;
}

/// x · u in double: eight partial sums (element i into sum i mod 8), added pairwise, then the tail.
/// A fixed order, so one value per token whatever its group, thread or CPU; the eight chains let
/// the compiler vectorise what one dependent chain of adds would run at a quarter of an add per
/// cycle (measured: +3.8 % of a MiniLM run with two direction axes, bench/context_axes_overhead.sh).
static double dot_double(const float* x, const float* u, std::size_t D) {
  double acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= D; i += 8)
    for (std::size_t k = 0; k < 8; ++k) acc[k] += double(x[i + k]) * double(u[i + k]);
  double tail = 0;
  for (; i < D; ++i) tail += double(x[i]) * double(u[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/// The direction axes' values of the group's T rows at layer stream.layer: out[k*T + t] = x[t] · u_l[k].
static void direction_values(const LayerStream& stream, std::size_t T, std::vector<float>& out) {
  const DirectionAxes& d = *stream.directions;
  const std::size_t D = stream.hidden;
  out.resize(std::size_t(d.count) * T);
  for (std::uint32_t k = 0; k < d.count; ++k) {
    const float* u = d.u + (stream.layer * d.count + k) * D;
    for (std::size_t t = 0; t < T; ++t) out[k * T + t] = static_cast<float>(dot_double(stream.x + t * D, u, D));
  }
}

void attend_reports(AttentionReport in, const std::uint64_t* token_offset, std::size_t r0, std::size_t r1,
                    const float* qkv, const float* const* axis, const AttentionOut& o, SimdLevel level, std::size_t dh,
                    float* ctx, ModelScratch& s, const LayerStream& stream) {
  const std::size_t H = in.heads, W = H * dh;
  const std::uint64_t t0 = token_offset[r0];
  const std::size_t T = token_offset[r1] - t0;
  const std::uint32_t dirs = stream.directions ? stream.directions->count : 0, fixed = in.axes - dirs;
  if (dirs) direction_values(stream, T, s.direction);
  std::vector<const float*> ax(in.axes);
  in.axis = ax.data();
  for (std::size_t r = r0; r < r1; ++r) {
    const std::uint64_t b = token_offset[r];
    const std::size_t n = token_offset[r + 1] - b;
    in.n = static_cast<std::uint32_t>(n);
    in.qkv = qkv + (b - t0) * in.ld;
    for (std::uint32_t c = 0; c < fixed; ++c) ax[c] = axis[c] + b;
    for (std::uint32_t k = 0; k < dirs; ++k) ax[fixed + k] = s.direction.data() + k * T + (b - t0);
    s.heads_out.resize(n * W);
    AttentionReportOut ro = report_out(o, r);
    ro.head_out = ctx ? s.heads_out.data() : nullptr;
    attention_report(in, ro, level, s.attention);
    if (!ctx) continue;
    // concat_h(O_h), heads 1..H: block h is n x dh (the baseline has none).
    const float* o1 = s.heads_out.data();
    float* c = ctx + (b - t0) * W;
    for (std::size_t q = 0; q < n; ++q)
      for (std::size_t h = 0; h < H; ++h) std::memcpy(c + q * W + h * dh, o1 + (h * n + q) * dh, dh * sizeof(float));
  }
}

}  // namespace model
}  // namespace headsep
