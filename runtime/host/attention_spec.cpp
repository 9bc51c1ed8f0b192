// The host side of ABI 1.1's attention specs: a plugin's headsep_attention_spec (matrices it
// owns, a safetensors path, or a seed) becomes an AttentionPlan the engine runs. Everything is
// checked here, once, before any worker thread starts; messages name the plugin.
#include "host/attention_spec.hpp"

#include <cstring>

#include "headsep/safetensors.hpp"

namespace headsep {
namespace {

std::vector<float> copy(const float* p, std::size_t n) { return p ? std::vector<float>(p, p + n) : std::vector<float>(); }

// Projection weights one spec without a weights file may make the host hold (its own matrices or
// seeded ones): 2^27 floats, 512 MiB; a d_model 4096 layer with its baseline needs 117 M.
constexpr std::uint64_t kMaxSpecWeights = std::uint64_t(1) << 27;

}  // namespace

AttentionSpecPlan plan_from_spec(const headsep_attention_spec* raw, const Schema& schema, std::uint32_t heads,
                                 const std::string& label, std::uint32_t scenario) {
  auto fail = [&](const std::string& what) {
    return PluginError(label + ": attention spec " + std::to_string(scenario) + ": " + what);
  };
  if (!raw) throw fail("NULL");
  // A spec the plugin built against an older header is zero-extended, like the descriptor.
  headsep_attention_spec spec{};
  const std::uint32_t size = raw->struct_size;
  if (size < offsetof(headsep_attention_spec, weights_path)) throw fail("struct_size " + std::to_string(size) + " is too small");
  // Whole fields only: from weights_path on every field is 8 bytes, so a struct_size that ends
  // inside a pointer leaves it absent instead of half-copied (a wild pointer).
  std::memcpy(&spec, raw, std::min<std::size_t>(size, sizeof spec) / alignof(void*) * alignof(void*));

  AttentionSpecPlan out;
  if (spec.input == HEADSEP_INPUT_FEATURES) {
    out.reads_features = true;
  } else if (spec.input != HEADSEP_INPUT_EMBEDDINGS) {
    throw fail("unknown input " + std::to_string(spec.input) + " (0 = embeddings, 1 = features)");
  }
  const std::uint32_t x_width = out.reads_features ? static_cast<std::uint32_t>(schema.feature_names.size()) : schema.d_model;
  if (x_width == 0)
    throw fail(out.reads_features ? std::string("reads the feature columns, but the scenario generator has none")
                                  : std::string("reads token embeddings, but the scenario generator gives none (its d_model is 0)"));
  if (spec.heads != heads)
    throw fail("declares " + std::to_string(spec.heads) + " heads but the scheme has " + std::to_string(heads));

  AttentionConfig cfg;
  switch (spec.query) {
    case HEADSEP_QUERY_ALL: cfg.query = QueryMode::all; break;
    case HEADSEP_QUERY_FIRST: cfg.query = QueryMode::first; break;
    case HEADSEP_QUERY_LAST: cfg.query = QueryMode::last; break;
    case HEADSEP_QUERY_INDEX: cfg.query = QueryMode::index, cfg.query_index = spec.query_index; break;
    default: throw fail("unknown query mode " + std::to_string(spec.query));
  }
  if (spec.mask == HEADSEP_MASK_CAUSAL) cfg.mask = MaskKind::causal;
  else if (spec.mask != HEADSEP_MASK_NONE) throw fail("unknown mask " + std::to_string(spec.mask));

  AttentionWeights w;
  try {
    const bool from_file = spec.weights_path && *spec.weights_path;
    if (from_file) {
      AttentionLoadOptions lo;
      if (spec.baseline_path && *spec.baseline_path) lo.baseline = spec.baseline_path;
      lo.d_model = x_width;
      w = load_attention_safetensors(spec.weights_path, heads, lo);
    } else {
      if (spec.d_model != x_width)
        throw fail("d_model " + std::to_string(spec.d_model) + " does not match the input's width " + std::to_string(x_width));
      if (spec.d_k == 0 || spec.d_v == 0) throw fail("d_k and d_v must be at least 1");
      if (spec.d_k > 65536 || spec.d_v > 65536 || spec.d_model > 65536 || heads > 1024)
        throw fail("d_model, d_k, d_v are limited to 65536 and heads to 1024");
      // Each within its limit, together they can still ask for terabytes (found by tests/fuzz:
      // heads 1024 x d_k 65536 x d_model 8 allocated 2 GiB per matrix): bound what the host is
      // about to hold — Q, K, V and output projections and the baseline's — before allocating it.
      const std::uint64_t D = spec.d_model, qk = std::uint64_t(heads) * spec.d_k, hv = std::uint64_t(heads) * spec.d_v;
      const std::uint64_t floats = 2 * qk * D + 2 * hv * D + 3 * D * D;  // at most ~2^44: no overflow
      if (floats > kMaxSpecWeights)
        throw fail("d_model " + std::to_string(D) + ", heads " + std::to_string(heads) + ", d_k " + std::to_string(spec.d_k) +
                   ", d_v " + std::to_string(spec.d_v) + " need " + std::to_string(floats) + " projection weights; at most " +
                   std::to_string(kMaxSpecWeights) + " (512 MiB of float32) are allowed");
      if (spec.w_q) {
        if (!spec.w_k || !spec.w_v) throw fail("w_q is given but w_k or w_v is NULL");
        const std::size_t D = spec.d_model, qk = std::size_t(heads) * spec.d_k, v = std::size_t(heads) * spec.d_v;
        w.d_model = spec.d_model, w.heads = heads, w.d_k = spec.d_k, w.d_v = spec.d_v;
        w.w_q = copy(spec.w_q, qk * D), w.b_q = copy(spec.b_q, qk);
        w.w_k = copy(spec.w_k, qk * D), w.b_k = copy(spec.b_k, qk);
        w.w_v = copy(spec.w_v, v * D), w.b_v = copy(spec.b_v, v);
        w.w_o = copy(spec.w_o, D * v), w.b_o = spec.w_o ? copy(spec.b_o, D) : std::vector<float>();
      } else {
        w = seeded_attention_weights(spec.d_model, heads, spec.d_k, spec.d_v, spec.seed);
      }
    }
    // The baseline: the file's, else the plugin's s_* matrices (over the seeded heads' baseline
    // too: non-NULL means "use these"), else seeded.
    const bool file_baseline = from_file && !w.s_w_q.empty();
    const bool given = spec.s_w_q || spec.s_w_k || spec.s_w_v;
    if (given && !(spec.s_w_q && spec.s_w_k && spec.s_w_v))
      throw fail(std::string("the baseline's s_w_q, s_w_k and s_w_v are given together or not at all (NULL:") +
                 (spec.s_w_q ? "" : " s_w_q") + (spec.s_w_k ? "" : " s_w_k") + (spec.s_w_v ? "" : " s_w_v") + ")");
    if (!file_baseline && (given || w.s_w_q.empty())) {
      const std::size_t D = w.d_model;
      if (given) {
        w.s_w_q = copy(spec.s_w_q, D * D), w.s_b_q = copy(spec.s_b_q, D);
        w.s_w_k = copy(spec.s_w_k, D * D), w.s_b_k = copy(spec.s_b_k, D);
        w.s_w_v = copy(spec.s_w_v, D * D), w.s_b_v = copy(spec.s_b_v, D);
      } else {
        auto single = seeded_attention_weights(w.d_model, 1, w.d_model, w.d_model, spec.seed ^ 0x5eedba5e11e5ULL, false);
        w.s_w_q = std::move(single.w_q), w.s_w_k = std::move(single.w_k), w.s_w_v = std::move(single.w_v);
        w.s_b_q.clear(), w.s_b_k.clear(), w.s_b_v.clear();
      }
    }
    if (w.d_model != x_width)
      throw fail("the weights' d_model is " + std::to_string(w.d_model) + " but the input X is " + std::to_string(x_width) +
                 " wide (" + (out.reads_features ? "feature columns" : "embeddings") + ")");
    w.validate("its matrices");  // (fail() below names the plugin and the spec once)
    out.plan = std::make_shared<const AttentionPlan>(w, cfg);
  } catch (const PluginError&) {
    throw;
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
  return out;
}

}  // namespace headsep
