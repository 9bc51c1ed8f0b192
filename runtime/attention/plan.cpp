// AttentionWeights, seeded weights, statistic names and AttentionPlan (see attention.hpp).
//
// run() per group of consecutive reports (at most kGroupTokens tokens and about kGroupBytes of
// projections, so they are still in L2 when the kernel reads them; a longer report alone):
//   X rows of the group ──project──▶ scratch.qkv [token][ld] = X·proj + bias  (Q|K|V of every head)
//        └─ per report: attention_report (fused scores → softmax → A·V → metrics, kernels/)
//                       └─ optional output projection: concat_h(O_h) W_O + b_O
//
// Projections: our own panel kernel (kernels::project_rows) by default, OpenBLAS sgemm when code
// asks for it (kernels::set_attention_gemm_blas: the tests; bench_attention times both, run/ and
// run-blas/). Measured (bench_attention gemm/ vs project/, Xeon model 207, 1
// core): Debian's OpenBLAS 0.3.21 does not know this CPU and runs its Prescott (SSE3) kernels,
// ~14 GFLOP/s on these shapes; even forced to its SkylakeX kernels (OPENBLAS_CORETYPE) it is at
// best on par with the panel kernel at K = d_model = 64..256. The panel kernel is also
// row-independent by construction (bit-identical grouping with no padding).
//
// BLAS and threads: the engine runs plans inside oneTBB tasks, one scratch per thread. OpenBLAS's
// pthread build would otherwise start its own pool per call and oversubscribe the cores TBB
// already uses (and its threaded paths change the summation order with the thread count), so
// it is set to one thread, once, for the process, when this library loads, and the pool its
// pthread build started at load is stopped (single_threaded_blas): every sgemm runs on the calling
// thread. A host that needs a threaded OpenBLAS elsewhere must know this.
//
// Bit-for-bit grouping: the result for a token must not depend on which reports share its
// group (chunking must not change output). The panel kernel guarantees it by construction.
// OpenBLAS computes a row with the same instruction sequence only when the row is inside a full
// register block of rows: a call whose row count is odd or 2 mod 4 handles the tail rows with
// other kernels and a different summation order. So every sgemm gets a multiple of kRowBlock
// rows: the group's last partial block is copied into a zero-padded kRowBlock-row buffer and
// projected by a second call. Measured (0.3.21, OPENBLAS_CORETYPE): that makes its Prescott and
// SkylakeX kernels bit-identical across groupings, not its Haswell/Zen ones (up to 2e-7
// relative), which tests/kernels/test_attention.cpp therefore holds to 1e-5 on the BLAS path.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "headsep/attention.hpp"
#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"

// OpenBLAS (pthread build): joins its thread pool; a later threaded call would start it again.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace headsep {
namespace {

constexpr std::size_t kGroupTokens = 2048;        ///< tokens projected by one call (a longer report alone)
constexpr std::size_t kGroupBytes = std::size_t(1) << 20;  ///< ... and about this many bytes of projections
constexpr std::size_t kRowBlock = 16;             ///< OpenBLAS: every sgemm's row count is a multiple of this

/// The projection backend: 0 = the panel kernel (the default), 1 = OpenBLAS. Only code switches it
/// (kernels::set_attention_gemm_blas); no environment variable does.
std::atomic<int> g_gemm{0};
bool use_blas() { return g_gemm.load(std::memory_order_relaxed) == 1; }

std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fill_uniform(std::vector<float>& v, std::size_t count, double a, std::uint64_t seed, std::uint64_t matrix) {
  v.resize(count);
  const std::uint64_t key = splitmix64(seed ^ splitmix64(matrix));
  for (std::size_t i = 0; i < count; ++i) {
    const double u = double(splitmix64(key + i) >> 40) * (1.0 / 16777216.0);
    v[i] = static_cast<float>(a * (2.0 * u - 1.0));
  }
}

void check_size(std::string_view what, const char* name, std::size_t have, std::size_t want, const std::string& shape,
                bool may_be_empty) {
  if (have == want || (may_be_empty && have == 0)) return;
  throw Error(std::string(what) + ": " + name + " has " + std::to_string(have) + " values, expected " +
              std::to_string(want) + " (" + shape + ")" + (may_be_empty ? " or none" : ""));
}

void check_finite(std::string_view what, const char* name, const std::vector<float>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw Error(std::string(what) + ": " + name + "[" + std::to_string(i) + "] is not finite");
}

bool any_nonzero(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; });
}

std::string dims(std::uint64_t a, const char* an, std::uint64_t b, const char* bn) {
  return std::string(an) + " x " + bn + " = " + std::to_string(a) + " x " + std::to_string(b);
}

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    openblas_set_num_threads(1);
    // Then stop the pool the pthread build started when it was loaded: its threads spin in
    // sched_yield for 2^28 TSC ticks (~0.1 s) waiting for work that never comes (every sgemm here
    // runs on the calling thread), taking a core from the engine's threads. Measured (2048 x 64 x
    // 64 x 4, 2 vCPUs, load ~2.7): a 1-thread run 0.27-0.31 s -> 0.155 s, as with
    // OPENBLAS_NUM_THREADS=1. Weak: the OpenMP and serial builds have no such pool or function.
    if (blas_thread_shutdown_) blas_thread_shutdown_();
  });
}

// At load time, so no run (with or without attention) starts beside the spinning pool.
[[maybe_unused]] const bool g_blas_single = (single_threaded_blas(), true);

}  // namespace

void kernels::set_attention_gemm_blas(bool blas) { g_gemm.store(blas ? 1 : 0, std::memory_order_relaxed); }

void AttentionWeights::validate(std::string_view what) const {
  if (d_model == 0 || heads == 0 || d_k == 0 || d_v == 0)
    throw Error(std::string(what) + ": d_model, heads, d_k and d_v must be positive (got " + std::to_string(d_model) +
                ", " + std::to_string(heads) + ", " + std::to_string(d_k) + ", " + std::to_string(d_v) + ")");
  const std::uint64_t dm = d_model, hk = std::uint64_t(heads) * d_k, hv = std::uint64_t(heads) * d_v;
  check_size(what, "w_q", w_q.size(), hk * dm, dims(hk, "heads*d_k", dm, "d_model"), false);
  check_size(what, "w_k", w_k.size(), hk * dm, dims(hk, "heads*d_k", dm, "d_model"), false);
  check_size(what, "w_v", w_v.size(), hv * dm, dims(hv, "heads*d_v", dm, "d_model"), false);
  check_size(what, "b_q", b_q.size(), hk, "heads*d_k = " + std::to_string(hk), true);
  check_size(what, "b_k", b_k.size(), hk, "heads*d_k = " + std::to_string(hk), true);
  check_size(what, "b_v", b_v.size(), hv, "heads*d_v = " + std::to_string(hv), true);
  check_size(what, "w_o", w_o.size(), dm * hv, dims(dm, "d_model", hv, "heads*d_v"), true);
  check_size(what, "b_o", b_o.size(), dm, "d_model = " + std::to_string(dm), true);
  if (w_o.empty() && !b_o.empty()) throw Error(std::string(what) + ": b_o is given but w_o is not");
  for (auto [name, v] : {std::pair{"s_w_q", &s_w_q}, {"s_w_k", &s_w_k}, {"s_w_v", &s_w_v}})
    check_size(what, name, v->size(), dm * dm, dims(dm, "d_model", dm, "d_model"), false);
  for (auto [name, v] : {std::pair{"s_b_q", &s_b_q}, {"s_b_k", &s_b_k}, {"s_b_v", &s_b_v}})
    check_size(what, name, v->size(), dm, "d_model = " + std::to_string(dm), true);
  for (auto [name, v] : {std::pair{"w_q", &w_q}, {"w_k", &w_k}, {"w_v", &w_v}, {"b_q", &b_q}, {"b_k", &b_k},
                         {"b_v", &b_v}, {"w_o", &w_o}, {"b_o", &b_o}, {"s_w_q", &s_w_q}, {"s_w_k", &s_w_k},
                         {"s_w_v", &s_w_v}, {"s_b_q", &s_b_q}, {"s_b_k", &s_b_k}, {"s_b_v", &s_b_v}})
    check_finite(what, name, *v);
}

AttentionWeights seeded_attention_weights(std::uint32_t d_model, std::uint32_t heads, std::uint32_t d_k,
                                          std::uint32_t d_v, std::uint64_t seed, bool output_projection) {
  AttentionWeights w;
  w.d_model = d_model, w.heads = heads, w.d_k = d_k, w.d_v = d_v;
  const double dm = d_model, hk = double(heads) * d_k, hv = double(heads) * d_v;
  const std::size_t m = d_model;
  // torch.nn.MultiheadAttention: xavier_uniform_ over the stacked in_proj_weight [Q; K; V].
  const double a_in = std::sqrt(6.0 / (dm + (2 * hk + hv)));
  const double a_single = std::sqrt(6.0 / (dm + 3 * dm));
  fill_uniform(w.w_q, std::size_t(hk) * m, a_in, seed, 0);
  fill_uniform(w.w_k, std::size_t(hk) * m, a_in, seed, 1);
  fill_uniform(w.w_v, std::size_t(hv) * m, a_in, seed, 2);
  if (output_projection) fill_uniform(w.w_o, m * std::size_t(hv), std::sqrt(6.0 / (hv + dm)), seed, 3);
  fill_uniform(w.s_w_q, m * m, a_single, seed, 4);
  fill_uniform(w.s_w_k, m * m, a_single, seed, 5);
  fill_uniform(w.s_w_v, m * m, a_single, seed, 6);
  return w;
}

std::string_view head_stat_name(std::uint32_t s) noexcept {
  switch (s) {
    case kEntropy: return "entropy";
    case kConfidence: return "confidence";
    case kSelfWeight: return "self_weight";
    case kPrevWeight: return "prev_weight";
    case kFirstWeight: return "first_weight";
    default: return "?";
  }
}

std::string_view pair_stat_name(std::uint32_t s) noexcept {
  switch (s) {
    case kJensenShannon: return "js_divergence";
    case kPositionOverlap: return "position_overlap";
    case kSubspaceCosine: return "subspace_cosine";
    case kOutputCosine: return "output_cosine";
    case kOutputDistance: return "output_distance";
    default: return "?";
  }
}

AttentionPlan::AttentionPlan(const AttentionWeights& w, AttentionConfig config)
    : d_model_(w.d_model), heads_(w.heads), d_k_(w.d_k), d_v_(w.d_v), config_(config) {
  w.validate("attention weights");
  single_threaded_blas();
  const std::size_t dm = d_model_, H = heads_, dk = d_k_, dv = d_v_;
  // Row layout: [Q0' | Q_1..Q_H | K_1..K_H | V_1..V_H] projected, then X itself as the
  // baseline's keys (copied, not multiplied). The baseline is a full-width head (d_k = d_model),
  // and only its attention map is read (pairs are among heads 1..H and the output projection
  // concatenates heads 1..H), so it needs no values, and its scores fold into one product:
  //   (X Wq^T + bq)(X Wk^T + bk)^T = X (Wq^T Wk) X^T + 1 (X Wk^T bq)^T + (terms constant per query row)
  // and a softmax ignores a constant added to a row, so Q0' = X M + b' with M = Wq^T Wk and
  // b' = bq^T Wk, against K0 = X, gives the same map: one d_model x d_model product per token
  // instead of two (256 x 256 x 256 x 8: a third less work than Q0, K0, V0 and A0·V0).
  const std::size_t hq = H * dk;
  proj_width_ = dm + 2 * hq + H * dv;
  width_ = proj_width_ + dm;
  // Row stride: whole 64-byte rows for wide matrices (aligned sgemm stores).
  ld_ = width_ >= 64 ? (width_ + 15) / 16 * 16 : width_;

  cols_.assign(5 * (H + 1), 0);
  for (std::size_t h = 0; h <= H; ++h) {
    cols_[h] = static_cast<std::uint32_t>(h ? dm + (h - 1) * dk : 0);
    cols_[(H + 1) + h] = static_cast<std::uint32_t>(h ? dm + hq + (h - 1) * dk : proj_width_);
    cols_[2 * (H + 1) + h] = static_cast<std::uint32_t>(dm + 2 * hq + (h ? (h - 1) * dv : 0));
    cols_[3 * (H + 1) + h] = static_cast<std::uint32_t>(h ? dk : dm);
    cols_[4 * (H + 1) + h] = static_cast<std::uint32_t>(h ? dv : 0);
  }

  // proj_[i][col] = W[out = col's row][in = i]: nn.Linear's [out][in] transposed, input-major.
  proj_.assign(dm * proj_width_, 0.0f);
  bias_.assign(proj_width_, 0.0f);
  auto put = [&](std::size_t col0, const std::vector<float>& wt, const std::vector<float>& b, std::size_t rows) {
    for (std::size_t o = 0; o < rows; ++o) {
      for (std::size_t i = 0; i < dm; ++i) proj_[i * proj_width_ + col0 + o] = wt[o * dm + i];
      if (!b.empty()) bias_[col0 + o] = b[o];
    }
  };
  {  // M[i][j] = Σ_o Wq[o][i] Wk[o][j] and b'[j] = Σ_o bq[o] Wk[o][j], in double, then rounded.
    // Blocks of 8 rows of M (16 KB at d_model = 256, in L1) against every row of Wk: with o outer
    // over all of M, its 512 KB went through L2 d_model times (8.6 ms of a 256-report qkv run at
    // 256 x 8, perf on Zen 4). Each M[i][j] still sums o in order: the same bits.
    std::vector<double> m(dm * dm, 0.0), b(dm, 0.0);
    constexpr std::size_t kRows = 8;
    for (std::size_t i0 = 0; i0 < dm; i0 += kRows) {
      const std::size_t i1 = std::min(dm, i0 + kRows);
      for (std::size_t o = 0; o < dm; ++o) {
        const float* wq = w.s_w_q.data() + o * dm;
        const float* wk = w.s_w_k.data() + o * dm;
        for (std::size_t i = i0; i < i1; ++i) {
          const double a = wq[i];
          double* mi = m.data() + i * dm;
          for (std::size_t j = 0; j < dm; ++j) mi[j] += a * double(wk[j]);
        }
      }
    }
    if (!w.s_b_q.empty())
      for (std::size_t o = 0; o < dm; ++o) {
        const float* wk = w.s_w_k.data() + o * dm;
        for (std::size_t j = 0; j < dm; ++j) b[j] += double(w.s_b_q[o]) * double(wk[j]);
      }
    // Finite weights whose product passes f32's range would give infinite scores: refused here,
    // naming the matrices, rather than as non-finite metrics of every report.
    const auto rounded = [](double v, const char* what, std::size_t i) {
      const float f = static_cast<float>(v);
      if (!std::isfinite(f))
        throw Error("attention weights: the single-head baseline's " + std::string(what) + " (element " +
                    std::to_string(i) + ": " + std::to_string(v) +
                    ") is out of float range; its scores would overflow (s_w_q, s_w_k, s_b_q too large)");
      return f;
    };
    for (std::size_t i = 0; i < dm; ++i)
      for (std::size_t j = 0; j < dm; ++j) proj_[i * proj_width_ + j] = rounded(m[i * dm + j], "W_Q^T W_K", i * dm + j);
    for (std::size_t j = 0; j < dm; ++j) bias_[j] = rounded(b[j], "b_Q^T W_K", j);
  }
  put(dm, w.w_q, w.b_q, hq);
  put(dm + hq, w.w_k, w.b_k, hq);
  put(dm + 2 * hq, w.w_v, w.b_v, H * dv);
  has_bias_ = any_nonzero(bias_);
  packed_ = kernels::pack_panels(proj_.data(), dm, proj_width_, bias_.data());

  if (!w.w_o.empty()) {  // W_O [d_model][H*dv] -> input-major [H*dv][d_model]
    const std::size_t hv = H * dv;
    w_o_t_.resize(hv * dm);
    for (std::size_t o = 0; o < dm; ++o)
      for (std::size_t i = 0; i < hv; ++i) w_o_t_[i * dm + o] = w.w_o[o * hv + i];
    b_o_ = w.b_o.empty() ? std::vector<float>(dm, 0.0f) : w.b_o;
    has_out_bias_ = any_nonzero(b_o_);
    packed_o_ = kernels::pack_panels(w_o_t_.data(), hv, dm, b_o_.data());
  }
}

/// The kernel's view of one report of the plan (columns and widths from the plan's table).
AttentionReport AttentionPlan::report_view() const noexcept {
  const std::size_t H1 = std::size_t(heads_) + 1;
  AttentionReport in;
  in.heads = heads_;
  in.ld = ld_;
  in.q_col = cols_.data();
  in.k_col = cols_.data() + H1;
  in.v_col = cols_.data() + 2 * H1;
  in.dk = cols_.data() + 3 * H1;
  in.dv = cols_.data() + 4 * H1;
  in.config = config_;
  return in;
}

std::size_t AttentionPlan::report_bytes(std::size_t n) const noexcept {
  AttentionReport in = report_view();
  in.n = static_cast<std::uint32_t>(n);
  in.axes = 0;
  std::size_t first = 0;
  const std::size_t nq = kernels::attention_query_rows(in, &first);
  // The largest tile any level takes (6-row blocks can give more rows than 8-row ones).
  const std::uint32_t tq = nq > 1 ? std::max(kernels::attention_tile_rows(n, heads_, kernels::attention_micro_rows(8)),
                                             kernels::attention_tile_rows(n, heads_, kernels::attention_micro_rows(16)))
                                  : 1;
  const std::size_t qkv = ((n + kRowBlock) * ld_ + kernels::kAttnMaxLanes) * sizeof(float);
  const std::size_t xpad = kRowBlock * d_model_ * sizeof(float);
  const std::size_t work = kernels::attention_work_floats(in, tq) * sizeof(float) +
                           kernels::attention_work_doubles(in) * sizeof(double);
  // Output projection: the kernel's O rows (heads 1..H) and their concatenation.
  const std::size_t outp = w_o_t_.empty() ? 0 : nq * 2 * std::size_t(heads_) * d_v_ * sizeof(float);
  return qkv + std::max(xpad, outp) + work;
}

namespace {

/// OpenBLAS projections of `tokens` rows: rows [0, full) straight from X, the last partial row
/// block through a zero-padded kRowBlock-row copy (see the top of this file).
void blas_rows(const float* x, std::size_t tokens, std::size_t dm, const std::vector<float>& proj,
               const std::vector<float>& bias, bool has_bias, std::size_t width, std::size_t ld,
               AttentionScratch& scratch) {
  const std::size_t full = tokens / kRowBlock * kRowBlock, rest = tokens - full;
  const std::size_t rows = full + (rest ? kRowBlock : 0);
  const std::size_t qkv_floats = rows * ld + kernels::kAttnMaxLanes;
  if (scratch.qkv.size() < qkv_floats) scratch.qkv.resize(qkv_floats);
  float* qkv = scratch.qkv.data();
  if (has_bias)
    for (std::size_t t = 0; t < rows; ++t) std::memcpy(qkv + t * ld, bias.data(), width * sizeof(float));
  const float beta = has_bias ? 1.0f : 0.0f;
  const int N = static_cast<int>(width), K = static_cast<int>(dm);
  if (full)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(full), N, K, 1.0f, x, K, proj.data(), N,
                beta, qkv, static_cast<int>(ld));
  if (rest) {
    if (scratch.acc.size() < kRowBlock * dm) scratch.acc.resize(kRowBlock * dm);
    float* xp = scratch.acc.data();
    std::memcpy(xp, x + full * dm, rest * dm * sizeof(float));
    std::memset(xp + rest * dm, 0, (kRowBlock - rest) * dm * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(kRowBlock), N, K, 1.0f, xp, K, proj.data(),
                N, beta, qkv + full * ld, static_cast<int>(ld));
  }
}

}  // namespace

double AttentionPlan::report_flops(std::size_t n) const noexcept {
  // 2 n d_model proj_width for the projections; scores 2 nq n d_k per head (the baseline's d_model
  // wide) and A·V 2 nq n d_v per head 1..H; a single query: nq = 1.
  const double nn = double(n), nq = config_.query == QueryMode::all ? nn : (n ? 1.0 : 0.0);
  const double hq = double(heads_) * d_k_, hv = double(heads_) * d_v_;
  return 2.0 * nn * double(d_model_) * double(proj_width_) + 2.0 * nq * nn * (double(d_model_) + hq + hv);
}

const float* AttentionPlan::project(const float* x, std::size_t tokens, SimdLevel level,
                                    AttentionScratch& scratch) const {
  const std::size_t dm = d_model_, ld = ld_;
  if (use_blas()) {
    blas_rows(x, tokens, dm, proj_, bias_, has_bias_, proj_width_, ld, scratch);
  } else {
    if (scratch.qkv.size() < tokens * ld + kernels::kAttnMaxLanes) scratch.qkv.resize(tokens * ld + kernels::kAttnMaxLanes);
    kernels::project_rows(level, x, dm, tokens, dm, packed_.get(), proj_width_, scratch.qkv.data(), ld);
  }
  float* qkv = scratch.qkv.data();
  for (std::size_t t = 0; t < tokens; ++t)  // the baseline's keys: X itself
    std::memcpy(qkv + t * ld + proj_width_, x + t * dm, dm * sizeof(float));
  return qkv;
}

void AttentionPlan::run(const float* x, const std::uint64_t* token_offset, std::size_t n_reports, std::uint32_t axes,
                        const float* const* axis, SimdLevel level, const AttentionOut& out, AttentionScratch& scratch,
                        std::size_t max_report_bytes) const {
  if (n_reports == 0) return;
  kernels::require_supported(level);
  const std::size_t H = heads_, P = H * (H - 1) / 2, dm = d_model_, ld = ld_;
  if (!out.head_stats || (axes && !out.context) || (P && !out.pair_stats))
    throw Error("attention: AttentionOut needs head_stats" + std::string(axes ? ", context" : "") +
                (P ? ", pair_stats" : "") + " rows");
  if (out.stride < n_reports)
    throw Error("attention: output stride " + std::to_string(out.stride) + " < " + std::to_string(n_reports) +
                " reports");
  if (out.maps && !out.maps_offset) throw Error("attention: AttentionOut::maps needs maps_offset");
  const bool project_out = out.output != nullptr;
  if (project_out && w_o_t_.empty())
    throw Error("attention: AttentionOut::output is set but the weights have no output projection (w_o)");
  if (project_out && !out.output_offset) throw Error("attention: AttentionOut::output needs output_offset");

  AttentionReport in = report_view();
  in.axes = axes;
  std::vector<const float*> ax(axes);
  in.axis = ax.data();
  const std::size_t hv = H * d_v_;

  std::size_t known_bytes[65] = {};
  std::vector<AttentionReport> reports;
  std::vector<AttentionReportOut> outs;
  std::vector<const float*> axis_rows;
  const bool blas = use_blas();
  const std::size_t group_tokens = std::max<std::size_t>(1, std::min(kGroupTokens, kGroupBytes / (ld * sizeof(float))));
  for (std::size_t r0 = 0; r0 < n_reports;) {
    // The group: consecutive reports while the tokens fit group_tokens (at least one report).
    std::size_t r1 = r0, tokens = 0;
    while (r1 < n_reports) {
      const std::size_t n = static_cast<std::size_t>(token_offset[r1 + 1] - token_offset[r1]);
      if (r1 > r0 && tokens + n > group_tokens) break;
      // Short reports are the common case: their working memory, once per length.
      std::size_t need = n < std::size(known_bytes) ? known_bytes[n] : 0;
      if (!need) {
        need = report_bytes(n);
        if (n < std::size(known_bytes)) known_bytes[n] = need;
      }
      if (need > max_report_bytes)
        throw Error("attention: report " + std::to_string(r1) + " has " + std::to_string(n) + " tokens and needs " +
                    std::to_string(need) + " bytes of working memory, over the budget of " +
                    std::to_string(max_report_bytes) + " bytes (max_report_bytes)");
      tokens += n;
      ++r1;
    }
    const std::uint64_t t0 = token_offset[r0];

    const float* qkv = project(x + t0 * dm, tokens, level, scratch);

    if (!project_out) {
      // The whole group in one call, so reports of a few tokens share the lane kernel.
      const std::size_t m = r1 - r0;
      reports.assign(m, in);
      outs.assign(m, AttentionReportOut{});
      axis_rows.resize(m * axes);
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t r = r0 + i;
        const std::uint64_t b = token_offset[r];
        AttentionReport& ri = reports[i];
        ri.n = static_cast<std::uint32_t>(token_offset[r + 1] - b);
        ri.qkv = qkv + (b - t0) * ld;
        for (std::uint32_t c = 0; c < axes; ++c) axis_rows[i * axes + c] = axis[c] + b;
        ri.axis = axis_rows.data() + i * axes;
        outs[i] = report_out(out, r);
      }
      attention_reports(reports.data(), outs.data(), m, level, scratch);
      r0 = r1;
      continue;
    }
    for (std::size_t r = r0; r < r1; ++r) {
      const std::uint64_t b = token_offset[r];
      in.n = static_cast<std::uint32_t>(token_offset[r + 1] - b);
      in.qkv = qkv + (b - t0) * ld;
      for (std::uint32_t c = 0; c < axes; ++c) ax[c] = axis[c] + b;
      AttentionReportOut ro = report_out(out, r);
      std::size_t first = 0;
      const std::size_t nq = kernels::attention_query_rows(in, &first);
      float* head_out = nullptr;
      if (project_out && nq) {
        const std::size_t need = nq * 2 * hv;  // O_1 .. O_H (the baseline has none), then the concat
        if (scratch.acc.size() < need) scratch.acc.resize(need);
        head_out = scratch.acc.data();
      }
      ro.head_out = head_out;
      attention_report(in, ro, level, scratch);
      if (!head_out) continue;
      // concat_h(O_h) for heads 1..H, [query][H*d_v], then one sgemm with W_O (input-major).
      float* cat = head_out + nq * hv;
      const float* o1 = head_out;  // block of head 1; head h's block follows, nq x d_v each
      for (std::size_t q = 0; q < nq; ++q)
        for (std::size_t h = 0; h < H; ++h)
          std::memcpy(cat + q * hv + h * d_v_, o1 + (h * nq + q) * d_v_, d_v_ * sizeof(float));
      float* y = out.output + out.output_offset[r];
      if (blas) {
        if (has_out_bias_)
          for (std::size_t q = 0; q < nq; ++q) std::memcpy(y + q * dm, b_o_.data(), dm * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq), static_cast<int>(dm),
                    static_cast<int>(hv), 1.0f, cat, static_cast<int>(hv), w_o_t_.data(), static_cast<int>(dm),
                    has_out_bias_ ? 1.0f : 0.0f, y, static_cast<int>(dm));
      } else {
        kernels::project_rows(level, cat, hv, nq, hv, packed_o_.get(), dm, y, dm);
      }
    }
    r0 = r1;
  }
}

}  // namespace headsep
