// The engine's attention stage (see stage.hpp).
//
// QKV schemes hand the whole batch to AttentionPlan::run (grouped BLAS projections, then the
// fused per-report kernel); explicit-map schemes (per-query layout) are checked row by row and
// measured here in double, with V = X. Both fill the same MetricBlock columns, so every sink
// treats them alike. Kept reports (--attention) are recomputed one by one with their maps
// materialised: the hot path never writes A to memory.
#include "attention/stage.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "headsep/error.hpp"
#include "headsep/finite.hpp"
#include "headsep/stats.hpp"
#include "support/float_bits.hpp"
#include "support/tsan_order.hpp"

namespace headsep {
namespace {

// ThreadSanitizer (tsan_order.hpp): released by a batch's thread before it splits the batch into
// parts, acquired first thing by each part, before the part reads the lambda's captures (a
// namespace-scope token needs none). Address only.
const char parts_handoff = 0;

// A batch of heavy reports is split into parts that run as nested oneTBB tasks: with one task per
// batch, the last batches of a run (and any batch the pipeline's in-flight bound leaves alone)
// kept one thread busy while the other idled — at 256 x 256 x 256 x 8 and 16 reports a batch,
// 1 -> 2 threads gave 1.6-1.8x. A part is at least kMinPartFlops of work (task overhead is
// microseconds), at most kPartsPerThread per thread. Every report's results are independent of
// which reports share its call (AttentionPlan::run), so the split never changes a bit.
constexpr double kMinPartFlops = 4e6;
constexpr std::size_t kPartsPerThread = 4;

std::size_t concurrency() {
  const std::size_t arena = static_cast<std::size_t>(oneapi::tbb::this_task_arena::max_concurrency());
  const std::size_t cap = oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
  return std::max<std::size_t>(1, std::min(arena, cap));
}

/// Splits reports [0, n_rep) into parts of about equal work (s.cuts); returns the part count.
std::size_t split_parts(const ReportBatch& b, const AttentionPlan& plan, AttentionStageScratch& s) {
  const std::size_t n_rep = b.n_reports(), threads = concurrency();
  s.cuts.assign({0, n_rep});
  if (threads < 2 || n_rep < 2) return 1;
  double total = 0;
  for (std::size_t r = 0; r < n_rep; ++r) total += plan.report_flops(b.report_length(r));
  const double by_work = std::floor(total / kMinPartFlops);
  const std::size_t parts = std::min({n_rep, threads * kPartsPerThread, static_cast<std::size_t>(std::min(by_work, 1e9))});
  if (parts < 2) return 1;
  s.cuts.assign(1, 0);
  double done = 0;
  for (std::size_t r = 0; r < n_rep; ++r) {
    done += plan.report_flops(b.report_length(r));
    // Cut after report r once the parts so far hold their share (the last part gets the rest).
    if (s.cuts.size() < parts && done >= total * double(s.cuts.size()) / double(parts) && r + 1 < n_rep)
      s.cuts.push_back(r + 1);
  }
  s.cuts.push_back(n_rep);
  return s.cuts.size() - 1;
}

std::string where(const std::string& label, const ReportBatch& b, std::size_t r, const std::string& scenario) {
  return (label.empty() ? std::string() : label + ": ") + "report '" + b.report_id(r) + "', scenario '" + scenario + "'";
}

/// X for the batch: the embeddings, or the feature columns as [token][F] floats.
const float* input_rows(const ReportBatch& b, bool features, AttentionStageScratch& s, std::size_t& width) {
  const std::size_t T = b.n_tokens();
  if (!features) {
    width = T ? b.embedding_size() / T : 0;
    if (T && width * T != b.embedding_size()) width = 0;
    return b.embedding_data();
  }
  width = b.features.size();
  s.x.resize(T * width);
  for (std::size_t f = 0; f < width; ++f) {
    const double* col = b.features[f].data();
    for (std::size_t t = 0; t < T; ++t) s.x[t * width + f] = static_cast<float>(col[t]);
  }
  return s.x.data();
}

void check_finite_input(const float* x, std::size_t count, const ReportBatch& b, std::size_t width,
                        const std::string& label, const std::string& scenario) {
  // first_non_finite vectorizes (std::isfinite per element did not: 3.5 % of a 64-token,
  // d_model 64 run).
  if (const std::size_t i = first_non_finite(x, count); i < count) {
    const std::size_t t = i / width;
    std::size_t r = std::upper_bound(b.token_offset.begin(), b.token_offset.end(), t) - b.token_offset.begin() - 1;
    throw Error(where(label, b, r, scenario) + ": input X of token " + std::to_string(t - b.token_offset[r] + 1) +
                ", column " + std::to_string(i % width) + " is not finite");
  }
}

/// Metrics from explicit maps: rows[h] holds report r's n x n block at qoff[r]; V = X.
void metrics_from_maps(const ReportBatch& b, const WeightBlock& w, const float* x, std::size_t width,
                       const std::vector<const float*>& axis, MetricBlock& m) {
  const std::size_t H = w.heads, C = axis.size(), n_rep = b.n_reports(), S = m.n;
  std::vector<double> ent(H + 1), out((H + 1) * width);
  for (std::size_t r = 0; r < n_rep; ++r) {
    const std::size_t t0 = b.token_offset[r], n = b.report_length(r);
    const std::uint64_t q0 = w.query_offset[r];
    std::vector<double> hs((H + 1) * kHeadStats, 0.0), ps(pair_count(H) * kPairStats, 0.0), ctx((H + 1) * C, 0.0);
    std::vector<double> dot_o(pair_count(H), 0.0), norm_o(H + 1, 0.0);
    for (std::size_t q = 0; q < n; ++q) {
      for (std::size_t h = 0; h <= H; ++h) {
        const double* a = w.rows[h].data() + q0 + q * n;
        double e = 0, mx = 0;
        for (std::size_t k = 0; k < n; ++k) {
          e -= a[k] > 0 ? a[k] * std::log(a[k]) : 0.0;
          mx = std::max(mx, a[k]);
        }
        ent[h] = e;
        double* s = &hs[h * kHeadStats];
        s[kEntropy] += e;
        s[kConfidence] += mx;
        s[kSelfWeight] += a[q];
        s[kPrevWeight] += q ? a[q - 1] : 0.0;
        s[kFirstWeight] += a[0];
        for (std::size_t c = 0; c < C; ++c) {
          double v = 0;
          for (std::size_t k = 0; k < n; ++k) v += a[k] * axis[c][t0 + k];
          ctx[h * C + c] += v;
        }
        double* o = &out[h * width];
        std::fill(o, o + width, 0.0);
        for (std::size_t k = 0; k < n; ++k)
          for (std::size_t d = 0; d < width; ++d) o[d] += a[k] * x[(t0 + k) * width + d];
        for (std::size_t d = 0; d < width; ++d) norm_o[h] += o[d] * o[d];
      }
      std::size_t p = 0;
      for (std::size_t i = 1; i <= H; ++i)
        for (std::size_t j = i + 1; j <= H; ++j, ++p) {
          const double* ai = w.rows[i].data() + q0 + q * n;
          const double* aj = w.rows[j].data() + q0 + q * n;
          double hm = 0, overlap = 0;
          for (std::size_t k = 0; k < n; ++k) {
            const double mk = 0.5 * (ai[k] + aj[k]);
            hm -= mk > 0 ? mk * std::log(mk) : 0.0;
            overlap += ai[k] * aj[k];
          }
          double dot = 0, d2 = 0;
          for (std::size_t d = 0; d < width; ++d) {
            dot += out[i * width + d] * out[j * width + d];
            const double diff = out[i * width + d] - out[j * width + d];
            d2 += diff * diff;
          }
          double* s = &ps[p * kPairStats];
          s[kJensenShannon] += hm - 0.5 * (ent[i] + ent[j]);
          s[kPositionOverlap] += overlap;
          s[kOutputDistance] += std::sqrt(d2);
          dot_o[p] += dot;
        }
    }
    // V = X for every head: the value subspaces coincide (cosine 1, or 0 for an all-zero X).
    double vnorm = 0;
    for (std::size_t i = t0 * width; i < (t0 + n) * width; ++i) vnorm += double(x[i]) * x[i];
    const double inv = n ? 1.0 / double(n) : 0.0;
    for (std::size_t h = 0; h <= H; ++h) {
      for (std::uint32_t s = 0; s < kHeadStats; ++s) m.head_stats[(h * kHeadStats + s) * S + r] = hs[h * kHeadStats + s] * inv;
      for (std::size_t c = 0; c < C; ++c) m.context[(h * C + c) * S + r] = ctx[h * C + c] * inv;
    }
    std::size_t p = 0;
    for (std::size_t i = 1; i <= H; ++i)
      for (std::size_t j = i + 1; j <= H; ++j, ++p) {
        auto at = [&](std::uint32_t s) -> double& { return m.pair_stats[(p * kPairStats + s) * S + r]; };
        at(kJensenShannon) = std::max(0.0, ps[p * kPairStats + kJensenShannon] * inv);
        at(kPositionOverlap) = ps[p * kPairStats + kPositionOverlap] * inv;
        at(kOutputDistance) = ps[p * kPairStats + kOutputDistance] * inv;
        at(kSubspaceCosine) = vnorm > 0 ? 1.0 : 0.0;
        const double den = std::sqrt(norm_o[i] * norm_o[j]);
        at(kOutputCosine) = den > 0 ? dot_o[p] / den : 0.0;
      }
  }
}

/// Every row of every map a distribution: finite, >= 0, summing to 1 within 1e-3.
void check_maps(const ReportBatch& b, const WeightBlock& w, const std::string& label, const std::string& scenario) {
  for (std::size_t r = 0; r < b.n_reports(); ++r) {
    const std::size_t n = b.report_length(r);
    for (std::uint32_t h = 0; h <= w.heads; ++h)
      for (std::size_t q = 0; q < n; ++q) {
        const double* a = w.rows[h].data() + w.query_offset[r] + q * n;
        double sum = 0;
        bool ok = true;
        for (std::size_t k = 0; k < n; ++k) {
          ok &= a[k] >= 0.0 && a[k] <= 1.0 + 1e-3;
          sum += a[k];
        }
        if (ok && std::fabs(sum - 1.0) <= 1e-3) continue;
        for (std::size_t k = 0; k < n; ++k)
          if (detail::is_unwritten(a[k]))
            throw Error(where(label, b, r, scenario) + ": " + (h ? "head" + std::to_string(h) : std::string("single")) +
                        " attention row of query " + std::to_string(q + 1) + ", key " + std::to_string(k + 1) +
                        " was not written by weights() (a scheme must fill every map it is given)");
        char v[64];
        std::snprintf(v, sizeof v, "%g", sum);
        throw Error(where(label, b, r, scenario) + ": " + (h ? "head" + std::to_string(h) : std::string("single")) +
                    " attention row of query " + std::to_string(q + 1) +
                    (ok ? std::string(" sums to ") + v : std::string(" has a weight that is negative, above 1 or not finite")) +
                    " (each query's weights must be a distribution: >= 0, summing to 1)");
      }
  }
}

// ---- attention_slot's steps, in the order it runs them --------------------------------------------

std::string labelled(const std::string& label) { return label.empty() ? std::string() : label + ": "; }

/// X for the batch (input_rows), checked: some columns when there are tokens, every value finite.
const float* checked_input(const ReportBatch& b, bool features, AttentionStageScratch& s, std::size_t& width,
                           const std::string& label, const std::string& scenario) {
  const float* x = input_rows(b, features, s, width);
  if (b.n_tokens() && width == 0)
    throw Error(labelled(label) + "scenario '" + scenario +
                "': the attention scheme reads token embeddings, but the scenario generator gives none "
                "(use a generator with d_model > 0, e.g. -p ops-reports.d_model=64, or let the scheme read the features)");
  check_finite_input(x, b.n_tokens() * width, b, width, label, scenario);
  return x;
}

/// A QKV scheme's input: X as wide as its d_model, each report within --max-report-mb.
void check_plan_input(const ReportBatch& b, const AttentionPlan& plan, bool reads_features, std::size_t width,
                      std::size_t max_report_bytes, const std::string& label, const std::string& scenario) {
  if (width != plan.d_model())
    throw Error(labelled(label) + "scenario '" + scenario + "': X is " + std::to_string(width) + " wide (" +
                (reads_features ? "feature columns" : "embeddings") + ") but the attention scheme's d_model is " +
                std::to_string(plan.d_model()));
  std::size_t known[65] = {};  // per length, for the short reports that make up most batches
  auto bytes = [&](std::size_t n) {
    if (n >= std::size(known)) return plan.report_bytes(n);
    return known[n] ? known[n] : (known[n] = plan.report_bytes(n));
  };
  for (std::size_t r = 0; r < b.n_reports(); ++r)
    if (const std::size_t need = bytes(b.report_length(r)); need > max_report_bytes)
      throw Error(where(label, b, r, scenario) + ": " + std::to_string(b.report_length(r)) + " tokens need " +
                  std::to_string((need + (1 << 20) - 1) >> 20) + " MiB of attention working memory, over the limit of " +
                  std::to_string(max_report_bytes >> 20) + " MiB (--max-report-mb)");
}

/// A QKV scheme over the batch into m: in one call, or split into parts run as nested tasks.
void run_plan(const ReportBatch& b, const AttentionPlan& plan, const float* x, SimdLevel level,
              std::size_t max_report_bytes, AttentionStageScratch& s, MetricBlock& m) {
  const std::size_t n_rep = b.n_reports(), C = s.axis.size();
  AttentionOut out;
  out.context = m.context.data();
  out.head_stats = m.head_stats.data();
  out.pair_stats = m.pair_stats.data();
  out.stride = n_rep;
  const std::size_t parts = split_parts(b, plan, s);
  if (parts == 1) {
    plan.run(x, b.token_offset.data(), n_rep, static_cast<std::uint32_t>(C), s.axis.data(), level, out, s.kernel,
             max_report_bytes);
    return;
  }
  // Part i: reports [cuts[i], cuts[i+1]) with scratch parts[i], writing only their columns.
  if (s.parts.size() < parts) s.parts.resize(parts);
  // The body exists before the release, so its captures are part of what the parts acquire.
  const auto part = [&](std::size_t i) {
    tsan::acquire(&parts_handoff);  // first: reading the captures (s, out, ...) comes after it
    const tsan::ReleaseOnExit done{&s.parts};
    const std::size_t r0 = s.cuts[i];
    AttentionOut o = out;
    o.context = out.context ? out.context + r0 : nullptr;
    o.head_stats = out.head_stats + r0;
    o.pair_stats = out.pair_stats ? out.pair_stats + r0 : nullptr;
    plan.run(x, b.token_offset.data() + r0, s.cuts[i + 1] - r0, static_cast<std::uint32_t>(C), s.axis.data(), level, o,
             s.parts[i], max_report_bytes);
  };
  tsan::release(&parts_handoff);  // the batch, cuts, scratch and body as this thread left them (TSan builds)
  // simple_partitioner: a handful of equal parts needs no adaptive splitting, and the auto
  // partitioner's steal check reads state libtbb (not built for ThreadSanitizer) hands over.
  oneapi::tbb::parallel_for(std::size_t(0), parts, part, oneapi::tbb::simple_partitioner());
  tsan::acquire(&s.parts);
}

/// An explicit-map scheme's block laid out per query (n x n per report) and sized, not filled.
void size_maps(const ReportBatch& b, std::uint32_t H, std::size_t max_report_bytes, WeightBlock& weights,
               const std::string& label, const std::string& scenario) {
  const std::size_t n_rep = b.n_reports();
  weights.layout = WeightBlock::Layout::per_query;
  weights.heads = H;
  weights.query_offset.resize(n_rep + 1);
  weights.query_offset[0] = 0;
  for (std::size_t r = 0; r < n_rep; ++r) {
    const std::uint64_t n = b.report_length(r);
    if (n > (std::uint64_t(1) << 16))
      throw Error(where(label, b, r, scenario) + ": " + std::to_string(n) +
                  " tokens: explicit attention maps are limited to 65536 tokens per report");
    weights.query_offset[r + 1] = weights.query_offset[r] + n * n;
  }
  const std::uint64_t total = weights.query_offset[n_rep];
  if (total * sizeof(double) * (H + 1) > max_report_bytes * 4)
    throw Error(labelled(label) + "scenario '" + scenario + "': the batch's attention maps need " +
                std::to_string(total * sizeof(double) * (H + 1) >> 20) + " MiB (at most 4 x --max-report-mb); " +
                (n_rep > 1 ? "lower --chunk" : "raise --max-report-mb or use shorter reports"));
  weights.rows.resize(H + 1);
  // Poisoned: a map entry the scheme leaves unwritten is refused by name (check_maps).
  for (auto& row : weights.rows) row.assign(total, detail::unwritten());
}

/// The slot's top reports by separation, as flags (none when keep_top is 0): any report in the
/// run's top N is in its batch's top N.
std::vector<char> top_reports(const MetricBlock& m, std::size_t n_rep, std::size_t keep_top) {
  std::vector<char> top(keep_top ? n_rep : 0, 0);
  if (keep_top) {
    TopK best(keep_top);
    for (std::size_t r = 0; r < n_rep; ++r)
      if (!std::isnan(m.separation[r])) best.add(m.separation[r], r);  // NaN: check_results names it
    for (const auto& [v, r] : best.sorted()) top[r] = 1;
  }
  return top;
}

/// The queries a QKV scheme measures of an n-token report: [q_first, q_first + nq).
void query_window(const AttentionPlan* plan, std::uint32_t n, std::uint32_t& q_first, std::uint32_t& nq) {
  nq = n, q_first = 0;
  if (plan && plan->config().query != QueryMode::all && n) {
    nq = 1;
    const auto& cfg = plan->config();
    std::int64_t q = cfg.query == QueryMode::first ? 0 : cfg.query == QueryMode::last ? std::int64_t(n) - 1 : cfg.query_index;
    if (q < 0) q += n;
    q_first = static_cast<std::uint32_t>(std::clamp<std::int64_t>(q, 0, n - 1));
  }
}

/// Report r recomputed alone with its maps (and output, when the scheme has one) written into
/// the dump at maps offset mo.
void rerun_with_maps(const ReportBatch& b, std::size_t r, const AttentionPlan& plan, const float* x, SimdLevel level,
                     std::size_t max_report_bytes, std::uint32_t nq, std::uint64_t mo, AttentionStageScratch& s,
                     AttentionDump& dump) {
  const std::uint32_t H = dump.heads;
  const std::size_t C = s.axis.size();
  const std::uint32_t dm = plan.has_output() ? plan.d_model() : 0;
  dump.d_model = dm;
  const std::uint64_t oo = dump.output.size();
  dump.output_offset.push_back(oo);
  dump.output.resize(oo + std::size_t(nq) * dm);
  std::vector<double> ctx((H + 1) * C), hs((H + 1) * kHeadStats), ps(pair_count(H) * kPairStats + 1);
  const std::uint64_t one[2] = {b.token_offset[r], b.token_offset[r + 1]};
  const std::uint64_t zero = 0;
  AttentionOut out;
  out.context = ctx.data();
  out.head_stats = hs.data();
  out.pair_stats = ps.data();
  out.stride = 1;
  out.maps = dump.maps.data() + mo;
  out.maps_offset = &zero;
  if (dm) {
    out.output = dump.output.data() + oo;
    out.output_offset = &zero;
  }
  plan.run(x, one, 1, static_cast<std::uint32_t>(C), s.axis.data(), level, out, s.kernel, max_report_bytes);
}

/// Report r's explicit maps (n x n per head), as floats, into the dump at maps offset mo.
void copy_maps(std::size_t r, std::uint32_t n, std::uint64_t mo, const WeightBlock& weights, AttentionDump& dump) {
  dump.output_offset.push_back(0);
  for (std::uint32_t h = 0; h <= dump.heads; ++h)
    for (std::size_t i = 0; i < std::size_t(n) * n; ++i)
      dump.maps[mo + std::size_t(h) * n * n + i] = static_cast<float>(weights.rows[h][weights.query_offset[r] + i]);
}

/// The maps of the reports the run keeps (its top reports, or those RunOptions::keep_maps picks).
void dump_maps(const ReportBatch& b, const AttentionPlan* plan, std::uint32_t H, const float* x, SimdLevel level,
               const WeightBlock& weights, const MetricBlock& m, const RunOptions& opt, AttentionStageScratch& s,
               AttentionDump& dump) {
  const std::size_t n_rep = b.n_reports();
  dump = AttentionDump{};
  dump.heads = H;
  const std::vector<char> top = top_reports(m, n_rep, opt.keep_top_maps);
  for (std::size_t r = 0; r < n_rep; ++r) {
    if (!(opt.keep_top_maps && top[r]) && !(opt.keep_maps && opt.keep_maps(b, r))) continue;
    const std::uint32_t n = static_cast<std::uint32_t>(b.report_length(r));
    std::uint32_t nq = n, q_first = 0;
    query_window(plan, n, q_first, nq);
    dump.reports.push_back(static_cast<std::uint32_t>(r));
    dump.queries.push_back(q_first);
    dump.n_queries.push_back(nq);
    const std::uint64_t mo = dump.maps.size();
    dump.maps_offset.push_back(mo);
    dump.maps.resize(mo + std::size_t(H + 1) * nq * n);
    if (plan) rerun_with_maps(b, r, *plan, x, level, opt.max_report_bytes, nq, mo, s, dump);
    else copy_maps(r, n, mo, weights, dump);
  }
}

}  // namespace

void derive_separation(MetricBlock& m) {
  // Row by row, contiguous over the reports so each loop vectorizes; every report still gets the
  // same operations in the same order as a report-at-a-time loop (the squares summed from 0 in
  // axis order, the distances in pair order): the same bits.
  const std::size_t C = m.axes, H = std::size_t(m.heads) + 1, S = m.n;
  const double* ctx = m.context.data();
  for (std::size_t h = 1; h < H; ++h)
    for (std::size_t c = 0; c < C; ++c) {
      const double* head = ctx + (h * C + c) * S;
      const double* single = ctx + c * S;
      double* d = m.difference.data() + ((h - 1) * C + c) * S;
      for (std::size_t r = 0; r < S; ++r) d[r] = head[r] - single[r];
    }
  double* total = m.separation.data();
  std::fill_n(total, S, 0.0);
  std::size_t p = 0;
  for (std::size_t i = 1; i < H; ++i)
    for (std::size_t j = i + 1; j < H; ++j, ++p) {
      double* dist = m.pairwise.data() + p * S;
      std::fill_n(dist, S, 0.0);
      for (std::size_t c = 0; c < C; ++c) {
        const double* a = ctx + (i * C + c) * S;
        const double* b = ctx + (j * C + c) * S;
        for (std::size_t r = 0; r < S; ++r) {
          const double d = a[r] - b[r];
          dist[r] += d * d;
        }
      }
      for (std::size_t r = 0; r < S; ++r) {
        dist[r] = std::sqrt(dist[r]);
        total[r] += dist[r];
      }
    }
  if (p)
    for (std::size_t r = 0; r < S; ++r) total[r] /= double(p);
}

void attention_slot(const ReportBatch& b, const Weighting& weighting, std::uint32_t slot,
                    const std::vector<std::vector<float>>& axis32, SimdLevel level, const std::string& scenario,
                    const std::string& label, WeightBlock& weights, AttentionStageScratch& s, MetricBlock& m,
                    const RunOptions& opt, AttentionDump* dump) {
  const std::size_t n_rep = b.n_reports(), C = axis32.size();
  const std::uint32_t H = weighting.heads();
  const AttentionPlan* plan = weighting.attention(slot);
  std::size_t width = 0;
  const float* x =
      checked_input(b, plan ? weighting.attention_reads_features() : b.embedding_size() == 0, s, width, label, scenario);
  s.axis.resize(C);
  for (std::size_t c = 0; c < C; ++c) s.axis[c] = axis32[c].data();

  m.head_stat_count = kHeadStats;
  m.pair_stat_count = kPairStats;
  m.resize(H, static_cast<std::uint32_t>(C), n_rep);

  if (plan) {
    check_plan_input(b, *plan, weighting.attention_reads_features(), width, opt.max_report_bytes, label, scenario);
    run_plan(b, *plan, x, level, opt.max_report_bytes, s, m);
  } else {
    size_maps(b, H, opt.max_report_bytes, weights, label, scenario);
    weighting.weights(b, slot, weights);
    check_maps(b, weights, label, scenario);
    metrics_from_maps(b, weights, x, width, s.axis, m);
  }
  derive_separation(m);

  if (!dump || (!opt.keep_maps && !opt.keep_top_maps)) return;
  dump_maps(b, plan, H, x, level, weights, m, opt, s, *dump);
}

}  // namespace headsep
