// headsep — real attention: QKV multi-head self-attention and the head-diversity metrics.
//
//   AttentionWeights w = ...;                  // projections (seeded, safetensors, a plugin's)
//   AttentionPlan plan(w, config);             // packs once: one stacked input-major matrix
//   AttentionScratch s;                        // per thread, reused across batches
//   plan.run(batch_x, token_offset, n_reports, axes, level, out, s);
//
// Per report (n tokens, never padded) and head h (0 = the single-head baseline, 1..H the heads):
//   Q_h = X W_Q^h + b_Q^h, K_h, V_h likewise; A_h = softmax(Q_h K_h^T / sqrt(d_k) + mask);
//   O_h = A_h V_h. The baseline is one head of full width (d_k = d_v = d_model) with its own
//   projections, as the seed compares one head against several.
// Compute is f32 (scores, softmax, A·V, each row accumulated in f32); per-query metric values
// are summed over queries in f64. The projections are one matrix product per group of reports
// (a packed-panel kernel; bench_attention compares it with OpenBLAS sgemm): a token's Q/K/V do not
// depend on which reports share its group, so chunking never changes a result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/kernels.hpp"

namespace headsep {

/// Which tokens are queries. `all`: every token (A_h is n x n), metrics averaged over queries;
/// the others read one query row (the seed's "one current token").
enum class QueryMode : std::uint8_t { all, first, last, index };
enum class MaskKind : std::uint8_t { none, causal };

struct AttentionConfig {
  QueryMode query = QueryMode::all;
  std::int64_t query_index = 0;  ///< QueryMode::index: 0-based; negative counts from the end (-1 = last);
                                 ///< clamped to the report's tokens
  MaskKind mask = MaskKind::none;
  /// MaskKind::causal only: query q sees its last `window` keys, (q - window, q] (Mistral's
  /// sliding window, as transformers masks it); 0 = every key 0..q.
  std::uint32_t window = 0;
  /// Attention-logit soft-capping (Gemma-2): each scaled score x becomes softcap · tanh(x / softcap)
  /// before the softmax, as transformers' eager attention does; 0 = none.
  float softcap = 0.0f;
};

/// The first key query q sees under `c` (0 unless a sliding window cuts it).
inline std::size_t first_visible_key(const AttentionConfig& c, std::size_t q) noexcept {
  return c.mask == MaskKind::causal && c.window && q + 1 > c.window ? q + 1 - c.window : 0;
}

/// Projection weights in PyTorch's nn.Linear layout (y = x Wᵀ + b, W is [out][in]), float32.
/// Heads are row blocks: rows [h*d_k, (h+1)*d_k) of w_q are head h+1's queries.
struct AttentionWeights {
  std::uint32_t d_model = 0, heads = 0, d_k = 0, d_v = 0;
  std::vector<float> w_q, w_k;  ///< [heads*d_k][d_model]
  std::vector<float> w_v;       ///< [heads*d_v][d_model]
  std::vector<float> b_q, b_k;  ///< [heads*d_k] (empty = zero)
  std::vector<float> b_v;       ///< [heads*d_v] (empty = zero)
  std::vector<float> w_o;       ///< [d_model][heads*d_v] (empty = no output projection)
  std::vector<float> b_o;       ///< [d_model] (empty = zero)
  /// The single-head baseline: one head of width d_model.
  std::vector<float> s_w_q, s_w_k, s_w_v;  ///< [d_model][d_model]
  std::vector<float> s_b_q, s_b_k, s_b_v;  ///< [d_model] (empty = zero)

  /// Throws Error naming `what` (e.g. a file) when a size does not match the declared shapes.
  void validate(std::string_view what) const;
};

/// Deterministic initialisation (documented in docs/ATTENTION.md): every matrix Xavier-uniform,
/// U(-a, a) with a = sqrt(6 / (fan_in + fan_out)), as torch.nn.MultiheadAttention initialises
/// in_proj_weight; biases zero; values drawn from splitmix64(seed, matrix, index), so a weight does
/// not depend on the order it is generated in.
/// As torch does for in_proj_weight, W_Q, W_K, W_V count as one stacked matrix: fan_in = d_model,
/// fan_out = heads*(2*d_k + d_v) (the baseline's: 3*d_model); W_O: fan_in = heads*d_v, fan_out = d_model.
/// Element i (row-major, [out][in]) of matrix m (0 w_q, 1 w_k, 2 w_v, 3 w_o, 4 s_w_q, 5 s_w_k, 6 s_w_v)
/// is a * (2u - 1), u = (splitmix64(splitmix64(seed ^ splitmix64(m)) + i) >> 40) * 2^-24, in double, then
/// rounded to float.
AttentionWeights seeded_attention_weights(std::uint32_t d_model, std::uint32_t heads, std::uint32_t d_k,
                                          std::uint32_t d_v, std::uint64_t seed, bool output_projection = true);

/// Per-head metrics, one column each per head h = 0..H (0 = baseline), averaged over queries.
enum HeadStat : std::uint32_t {
  kEntropy = 0,     ///< -Σ_k a log a (nats), the attention distribution's entropy
  kConfidence,      ///< max_k a: the largest weight of the query (Voita et al. 2019)
  kSelfWeight,      ///< a[q][q]: weight on the query token itself (Clark et al. 2019)
  kPrevWeight,      ///< a[q][q-1] (0 for q = 0)
  kFirstWeight,     ///< a[q][0]
  kHeadStats
};
/// Per-pair metrics, pairs (i, j), 1 <= i < j <= H, in the order (1,2), (1,3), ..., (H-1,H).
enum PairStat : std::uint32_t {
  kJensenShannon = 0,  ///< JS(A_i[q], A_j[q]) in nats, averaged over queries (Clark et al. 2019);
                       ///< H(M) - (H(P) + H(Q))/2, M = (P+Q)/2; the mean is clamped at 0 (rounding)
  kPositionOverlap,    ///< Σ_k A_i[q][k] A_j[q][k], averaged over queries (Li et al. 2018, position)
  kSubspaceCosine,     ///< cos(V_i, V_j) over the report's value vectors (Li et al. 2018, subspace):
                       ///< Σ_t V_i[t]·V_j[t] / (‖V_i‖ ‖V_j‖), norms over all t; 0 when a norm is 0
  kOutputCosine,       ///< cos(O_i, O_j) over the report's queries (Li et al. 2018, output):
                       ///< Σ_q O_i[q]·O_j[q] / (‖O_i‖ ‖O_j‖), norms over the queries; 0 when a norm is 0
  kOutputDistance,     ///< ‖O_i[q] - O_j[q]‖₂, averaged over queries
  kPairStats
};
std::string_view head_stat_name(std::uint32_t s) noexcept;  ///< "entropy", "confidence", ...
std::string_view pair_stat_name(std::uint32_t s) noexcept;  ///< "js_divergence", ...

/// Where a report's attention results go. Rows of `stride` doubles (stride >= n_reports):
///   context[(h*axes + c)*stride + r]          h = 0..H, the seed's context on axis c
///   head_stats[(h*kHeadStats + s)*stride + r] h = 0..H
///   pair_stats[(p*kPairStats + s)*stride + r] p over pairs of heads 1..H
/// context_h[c] = mean over queries of Σ_k A_h[q][k] · axis_c[k] (or the one designated query).
/// A report of 0 tokens has no query: every value is 0. Pair metrics need equal d_v for heads 1..H.
struct AttentionOut {
  double* context = nullptr;
  double* head_stats = nullptr;
  double* pair_stats = nullptr;
  std::size_t stride = 0;
  /// Optional (dumps, tests): per report r, (H+1) blocks of nq x n floats at maps_offset[r],
  /// block h at maps_offset[r] + h*nq*n, query-major. nq = n (QueryMode::all) or 1.
  float* maps = nullptr;
  const std::uint64_t* maps_offset = nullptr;
  /// Optional: the multi-head output concat_h(O_h) W_O + b_O (heads 1..H), [query row][d_model]:
  /// report r's nq rows start at output + output_offset[r] (in floats, like maps_offset). Needs w_o.
  float* output = nullptr;
  const std::uint64_t* output_offset = nullptr;
};

/// Per-thread working memory (projections of a group of reports, one query tile of A).
struct AttentionReport;

struct AttentionScratch {
  std::vector<float> qkv, tile, acc;
  std::vector<double> sums;  ///< the kernel's f64 per-head sums
};

/// One attention scheme, packed for the kernels. Immutable after construction: run() may be
/// called from several threads at once with distinct scratch.
class AttentionPlan {
 public:
  AttentionPlan(const AttentionWeights& w, AttentionConfig config);

  std::uint32_t heads() const noexcept { return heads_; }
  std::uint32_t d_model() const noexcept { return d_model_; }
  const AttentionConfig& config() const noexcept { return config_; }
  /// True when the scheme has an output projection (AttentionOut::output can be filled).
  bool has_output() const noexcept { return !w_o_t_.empty(); }
  /// Bytes of working memory one report of n tokens needs (projections + query tile).
  std::size_t report_bytes(std::size_t n) const noexcept;
  /// Approximate floating-point operations of one report of n tokens (projections, scores and
  /// A·V of every head and the baseline): what the engine balances its parallel parts by.
  double report_flops(std::size_t n) const noexcept;

  /// Attention and metrics for reports [0, n_reports): X is [token][d_model] row-major (tokens of
  /// report r at token_offset[r]..token_offset[r+1]), axis[c][token] the context axes.
  /// Throws Error when one report exceeds `max_report_bytes` (see report_bytes()).
  void run(const float* x, const std::uint64_t* token_offset, std::size_t n_reports, std::uint32_t axes,
           const float* const* axis, SimdLevel level, const AttentionOut& out, AttentionScratch& scratch,
           std::size_t max_report_bytes = std::size_t(1) << 30) const;

  // Layout, for the kernels and their benchmarks: proj is [d_model][proj_width], columns
  // [Q0' | Q_1..Q_H | K_1..K_H | V_1..V_H]; a projected row is those columns, then the baseline's
  // keys (X itself, d_model wide), `width` in all, at a stride of `ld` floats. The baseline (head 0)
  // has no values and its scores come from Q0' = X Wq0^T Wk0 + bq0^T Wk0 against X (attention.cpp).
  const std::vector<float>& proj() const noexcept { return proj_; }
  const std::vector<float>& proj_bias() const noexcept { return bias_; }
  std::size_t proj_width() const noexcept { return proj_width_; }
  std::size_t width() const noexcept { return width_; }
  std::size_t ld() const noexcept { return ld_; }
  /// Projects `tokens` rows of X (consecutive reports) into scratch.qkv as run() does; returns it.
  const float* project(const float* x, std::size_t tokens, SimdLevel level, AttentionScratch& scratch) const;
  /// The kernel's view of a report of this plan (n, qkv, axes and axis left for the caller).
  AttentionReport report_view() const noexcept;

 private:
  std::uint32_t d_model_ = 0, heads_ = 0, d_k_ = 0, d_v_ = 0;
  AttentionConfig config_;
  std::vector<float> proj_, bias_, w_o_t_, b_o_;
  std::size_t proj_width_ = 0, width_ = 0;
  std::size_t ld_ = 0;               ///< row stride of the projections in scratch (>= width_)
  std::vector<std::uint32_t> cols_;  ///< per head h = 0..H: q_col, k_col, v_col, dk, dv (5 rows of H+1)
  bool has_bias_ = false, has_out_bias_ = false;  ///< a projection bias / b_O is non-zero
  /// proj_ and W_O (input-major) in the projection kernel's panels, each followed by its padded
  /// bias; 64-byte aligned, shared by copies of the plan (immutable).
  std::shared_ptr<const float> packed_, packed_o_;
};

// ---- the fused kernel ------------------------------------------------------------------------

/// One report's projected Q/K/V for every head, as the fused kernel reads them.
/// Head h (0..H) has query width dk[h], value width dv[h]; its Q row of token t starts at
/// qkv + t*ld + q_col[h] (likewise K at k_col[h], V at v_col[h]).
struct AttentionReport {
  std::uint32_t n = 0;           ///< tokens
  std::uint32_t heads = 0;       ///< H (head 0 is the baseline, so H+1 heads are computed)
  const float* qkv = nullptr;
  std::size_t ld = 0;
  const std::uint32_t* q_col = nullptr;
  const std::uint32_t* k_col = nullptr;
  const std::uint32_t* v_col = nullptr;
  const std::uint32_t* dk = nullptr;
  const std::uint32_t* dv = nullptr;
  AttentionConfig config;
  std::uint32_t axes = 0;
  const float* const* axis = nullptr;  ///< [axes] -> this report's first token
};

/// Results of one report: pointers to its column r in AttentionOut's rows (stride as there).
struct AttentionReportOut {
  double* context = nullptr;     ///< [(h*axes + c)*stride]
  double* head_stats = nullptr;  ///< [(h*kHeadStats + s)*stride]
  double* pair_stats = nullptr;  ///< [(p*kPairStats + s)*stride]
  std::size_t stride = 0;
  float* maps = nullptr;         ///< optional: (H+1) x nq x n
  float* head_out = nullptr;     ///< optional: (H+1) blocks of nq x dv[h] (O_h rows), for the output projection
};

/// Report r's column of a batch's outputs (head_out left unset: the caller's buffer).
inline AttentionReportOut report_out(const AttentionOut& o, std::size_t r) noexcept {
  AttentionReportOut ro;
  ro.context = o.context ? o.context + r : nullptr;
  ro.head_stats = o.head_stats + r;
  ro.pair_stats = o.pair_stats ? o.pair_stats + r : nullptr;
  ro.stride = o.stride;
  ro.maps = o.maps ? o.maps + o.maps_offset[r] : nullptr;
  return ro;
}

/// Fused per-report attention: scores -> softmax -> A·V -> metrics, query tile by query tile, A
/// never leaving the tile. `scratch` is grown as needed. Levels as compute_metrics; the scalar
/// level is the reference every other is tested against.
void attention_report(const AttentionReport& in, const AttentionReportOut& out, SimdLevel level,
                      AttentionScratch& scratch);

/// attention_report over `count` reports of one plan (equal heads, widths, columns, config and
/// axes count; n, qkv, axis and outputs per report). Reports of a few tokens go through a kernel
/// that puts one report in each vector lane; every report gets the bits attention_report gives it.
void attention_reports(const AttentionReport* in, const AttentionReportOut* out, std::size_t count, SimdLevel level,
                       AttentionScratch& scratch);

/// Measured fp32 FMA peak of one core, GFLOP/s, at the best supported level (a ~50 ms
/// microbenchmark of independent FMA chains; cached after the first call).
double measure_fp32_peak_gflops();

}  // namespace headsep
