// fuzzplug.so — a plugin whose every declaration and behaviour comes from fuzz bytes, so the
// host's checks (runtime/host/: loader.cpp load_entry, params.cpp, scenario.cpp's schema check,
// chunk_sink.cpp and chunk_check.cpp, weighting.cpp's weighting-info checks, attention_spec.cpp
// plan_from_spec) run exactly as for a real plugin, through the real dlopen path, without a
// private entry point into the host. This file: the plugin's functions; script.cpp: the decoder.
//
// How the harness drives it (tests/fuzz/fuzz_plugin.hpp): it dlopens this file once (so the
// library stays loaded and the host's own loads share it), calls
// headsep_fuzz_plugin_set_input(bytes) to decode a whole script up front, then lets the host
// discover and use the plugin. The host cannot protect itself from a plugin that corrupts memory
// (docs/PLUGINS.md, "Not protected"), so this plugin lies about everything the host checks but
// never about its own memory: every array it hands over has the length it declares (or the host
// must refuse the count before reading it), and it writes only inside the buffers it asked for.
// Broken host promises it can see (parameters not canonical or out of order, malformed batch
// views) are recorded and read back with headsep_fuzz_plugin_violation().
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "headsep/plugin.h"
#include "script.hpp"

namespace {

using fuzzplug::Chunk;
using fuzzplug::kThrow;
using fuzzplug::Op;
using fuzzplug::Script;

Script g;                 // the current script (set_input replaces it; only ever touched by the harness thread)
std::string g_violation;  // first broken host promise seen

void violation(const std::string& what) {
  if (g_violation.empty()) g_violation = what;
}

// ---- the plugin's functions ---------------------------------------------------------------

struct State {
  const headsep_chunk_out* kept = nullptr;  // a pointer kept past its call (op 8)
  std::uint32_t x_width = 0;                // weighting: the width of its X
};

headsep_status fail(std::int32_t status, const char* fn) {
  if (status == static_cast<std::int32_t>(kThrow)) throw std::runtime_error(std::string("fuzzplug ") + fn + " threw");
  (void)fn;
  return status;
}

void check_params(const headsep_param* p, std::uint32_t n, const char* fn) {
  const std::string where = std::string(fn) + "(): ";
  if (n != g.d.n_params) return violation(where + "got " + std::to_string(n) + " parameters, the table has " + std::to_string(g.d.n_params));
  if (n && !p) return violation(where + "NULL parameter array");
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!p[i].name || !p[i].value) return violation(where + "a NULL parameter name or value");
    if (std::strcmp(p[i].name, g.params[i].name) != 0) return violation(where + "parameters not in table order");
    const std::string v = p[i].value;
    switch (g.params[i].type) {
      case HEADSEP_PARAM_BOOL:
        if (v != "true" && v != "false") violation(where + "bool value '" + v + "' not canonical");
        break;
      case HEADSEP_PARAM_INT: {
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end || errno || std::to_string(x) != v) violation(where + "int value '" + v + "' not canonical");
        break;
      }
      case HEADSEP_PARAM_FLOAT: {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || *end || !std::isfinite(x)) violation(where + "float value '" + v + "' not a finite number");
        break;
      }
      default: break;
    }
  }
}

headsep_status fp_open(const headsep_param* p, std::uint32_t n, void** state) {
  check_params(p, n, "open");
  if (g.open_status != HEADSEP_OK) return fail(g.open_status, "open");
  *state = g.null_state ? nullptr : new State;
  return HEADSEP_OK;
}

headsep_status fp_describe(void*, headsep_schema* schema) {
  if (g.describe_status != HEADSEP_OK) return fail(g.describe_status, "describe");
  if (!schema) {
    violation("describe(): NULL schema");
    return HEADSEP_ERROR;
  }
  // Write only what the host's struct holds (it set no struct_size: it is ABI 1.1, ours too).
  *schema = g.schema;
  return HEADSEP_OK;
}

void fp_close(void* state) { delete static_cast<State*>(state); }

// Token counts a plugin asks for: honest, off by one, or beyond the host's limit (never a huge
// count the host would have to honour: that is the plugin's memory, not a host bug).
std::uint64_t count(std::uint8_t mode, std::uint64_t honest) {
  switch (mode % 8) {
    case 1: return honest + 1;
    case 2: return honest ? honest - 1 : 0;
    case 3: return (std::uint64_t(1) << 31) + 1;
    case 4: return ~std::uint64_t(0);
    default: return honest;
  }
}

double value(std::uint8_t mode, std::uint64_t t) {
  switch (mode % 16) {
    case 1: return std::nan("");
    case 2: return -INFINITY;
    case 3: return 1e308 * (t + 1);
    default: return 0.25 * double(t % 7);
  }
}

struct ChunkRun {
  std::uint64_t index, max_reports, reports = 0, tokens = 0;
  std::uint64_t* off = nullptr;
};

void write_offsets(ChunkRun& c, std::uint64_t n, std::uint8_t lengths, std::uint8_t mode) {
  c.reports = n;
  std::uint64_t t = 0;
  for (std::uint64_t r = 0; r <= n; ++r) {
    c.off[r] = t;
    t += ((lengths >> (r % 4 * 2)) & 3) + (mode % 4 == 0 ? 1 : 0);
  }
  switch (mode % 8) {
    case 5: c.off[0] = 1; break;
    case 6: if (n >= 1) c.off[n] = 0; break;  // decreasing (when the report before had tokens)
    case 7: c.off[n] = (std::uint64_t(1) << 31) + 5; break;
    default: break;
  }
  c.tokens = c.off[n];
}

// Everything a well-formed chunk holds, for the schema this plugin declared.
headsep_status full_chunk(headsep_chunk_out* out, ChunkRun& c, const Op& op) {
  const auto& sc = g.schema;
  std::uint64_t n = op.a % 4 ? op.a % 4 : c.max_reports;
  if (sc.total_reports && (sc.flags & HEADSEP_SCHEMA_RANDOM_ACCESS) && op.a % 4 == 0) {
    const std::uint64_t first = c.index * c.max_reports;
    if (first >= sc.total_reports) return HEADSEP_END;
    n = std::min(c.max_reports, sc.total_reports - first);
  }
  if (n > 64) n = 64;
  c.off = out->token_offsets(out, n);
  if (!c.off) return HEADSEP_ERROR;
  write_offsets(c, n, op.b, 0);
  for (std::uint32_t f = 0; f < sc.n_features && f < 4096; ++f) {
    double* x = out->feature(out, f, c.tokens);
    if (!x) return HEADSEP_ERROR;
    for (std::uint64_t t = 0; t < c.tokens; ++t) x[t] = value(op.mode >> 4, t);
  }
  std::uint32_t slots = 0;
  if (sc.n_scenarios <= 4096 && sc.scenario_names)
    for (std::uint32_t j = 0; j < sc.n_scenarios && j < 4; ++j) {
      if (!sc.scenario_names[j]) continue;
      if (out->scenario(out, sc.scenario_names[j], std::strlen(sc.scenario_names[j])) != 0) return HEADSEP_ERROR;
      ++slots;
    }
  if (sc.given_heads && sc.given_heads <= 1024)
    for (std::uint32_t j = 0; j < slots; ++j)
      for (std::uint32_t h = 0; h <= sc.given_heads; ++h) {
        double* w = out->given_weights(out, j, h, c.tokens);
        if (!w) return HEADSEP_ERROR;
        for (std::uint64_t t = 0; t < c.tokens; ++t) w[t] = 0.5;
      }
  if (op.mode & 1)
    for (std::uint64_t r = 0; r < n; ++r) {
      const std::string id = "r" + std::to_string(c.index * c.max_reports + r);
      if (out->report_id(out, id.data(), id.size()) != 0) return HEADSEP_ERROR;
    }
  if (op.mode & 2)
    for (std::uint64_t t = 0; t < c.tokens; ++t)
      if (out->token_name(out, "tok", 3) != 0) return HEADSEP_ERROR;
  if (sc.d_model && sc.d_model <= 65536 && out->struct_size >= offsetof(headsep_chunk_out, embeddings) + sizeof(void*)) {
    float* e = out->embeddings(out, c.tokens);
    if (!e) return HEADSEP_ERROR;
    for (std::uint64_t k = 0; k < c.tokens * sc.d_model; ++k) e[k] = 0.125f * float(k % 5);
  }
  return HEADSEP_OK;
}

headsep_status run_op(headsep_chunk_out* out, ChunkRun& c, const Op& op, State* st) {
  switch (op.kind) {
    case 0:
      return full_chunk(out, c, op);
    case 1: {  // token_offsets
      const std::uint64_t n = op.a % 6 == 4 ? c.max_reports + 1 : op.a % 6 == 5 ? ~std::uint64_t(0) : op.a % 6;
      c.off = out->token_offsets(out, n);
      if (c.off) write_offsets(c, n, op.b, op.mode);
      return c.off ? HEADSEP_OK : HEADSEP_ERROR;
    }
    case 2: {  // one feature column
      const std::uint64_t n = count(op.mode, c.tokens);
      double* x = out->feature(out, op.a % 8 == 7 ? 0xffffffffu : op.a % 8, n);
      if (x)
        for (std::uint64_t t = 0; t < n; ++t) x[t] = value(op.b, t);
      return x ? HEADSEP_OK : HEADSEP_ERROR;
    }
    case 3:
      return out->scenario(out, op.text, op.len) == 0 ? HEADSEP_OK : HEADSEP_ERROR;
    case 4: {  // one given-weight row
      const std::uint64_t n = count(op.mode, c.tokens);
      const std::uint32_t slot = op.a % 8 == 7 ? 0xffffffffu : op.a % 8, row = op.b % 8 == 7 ? 0xffffffffu : op.b % 8;
      double* w = out->given_weights(out, slot, row, n);
      if (w)
        for (std::uint64_t t = 0; t < n; ++t) w[t] = 0.5;
      return w ? HEADSEP_OK : HEADSEP_ERROR;
    }
    case 5:
      return out->report_id(out, op.text, op.len) == 0 ? HEADSEP_OK : HEADSEP_ERROR;
    case 6:
      return out->token_name(out, op.text, op.len) == 0 ? HEADSEP_OK : HEADSEP_ERROR;
    case 7: {  // embeddings
      if (!g.schema.d_model || g.schema.d_model > 65536) {
        // Asking with no embeddings declared must be refused without an allocation.
        return out->embeddings(out, 1) ? HEADSEP_OK : HEADSEP_ERROR;
      }
      const std::uint64_t n = count(op.mode, c.tokens);
      float* e = out->embeddings(out, n);
      if (e)
        for (std::uint64_t k = 0; k < n * g.schema.d_model; ++k) e[k] = 0.5f;
      return e ? HEADSEP_OK : HEADSEP_ERROR;
    }
    case 8:  // keep `out` past this call
      if (st) st->kept = out;
      return HEADSEP_OK;
    case 9:  // use a kept `out` from an earlier call: the host must refuse (and fail the run)
      if (st && st->kept && st->kept != out) {
        auto* o = const_cast<headsep_chunk_out*>(st->kept);
        if (op.a & 1) o->token_offsets(o, 1);
        else o->scenario(o, "late", 4);
      }
      return HEADSEP_OK;
    default:
      out->source_rows = op.a;
      out->rows_read = op.b;
      return HEADSEP_OK;
  }
}

headsep_status fp_next_chunk(void* state, std::uint64_t index, std::uint64_t max_reports, headsep_chunk_out* out) {
  if (!out || !out->token_offsets || !out->feature || !out->scenario || !out->given_weights || !out->report_id ||
      !out->token_name) {
    violation("next_chunk(): NULL out or callback");
    return HEADSEP_ERROR;
  }
  if (max_reports == 0) violation("next_chunk(): max_reports 0");
  const Chunk* c = nullptr;
  if (index < g.chunks.size()) c = &g.chunks[index];
  else if (g.after_end == 1) c = &g.chunks[0];
  else if (g.after_end == 2) return fail(HEADSEP_ERROR, "next_chunk");
  else return HEADSEP_END;
  ChunkRun run{index, max_reports};
  for (const Op& op : c->ops) {
    const headsep_status st = run_op(out, run, op, static_cast<State*>(state));
    if (st == HEADSEP_END) return HEADSEP_END;
    if (st != HEADSEP_OK) return st;
  }
  if (c->status != HEADSEP_OK) return fail(c->status, "next_chunk");
  return HEADSEP_OK;
}

// ---- weighting schemes --------------------------------------------------------------------

headsep_status fp_create(const headsep_param* p, std::uint32_t n, const headsep_schema* schema, void** state) {
  check_params(p, n, "create");
  if (!schema) {
    violation("create(): NULL schema");
    return HEADSEP_ERROR;
  }
  if (schema->n_features && !schema->feature_names) violation("create(): schema without feature names");
  if (schema->n_scenarios && !schema->scenario_names) violation("create(): schema without scenario names");
  if (g.create_status != HEADSEP_OK) return fail(g.create_status, "create");
  auto* s = new State;
  s->x_width = schema->n_features;
  // The schema's d_model (ABI 1.1) for specs that read the embeddings.
  const std::uint32_t embed = schema->struct_size >= offsetof(headsep_schema, d_model) + 4 ? schema->d_model : 0;
  // Fix up the specs that follow the input (bit 0) and the scheme's heads (bit 1), then give
  // the matrices their honest sizes (or none when too big for a plugin to bother).
  g.matrices.clear();
  g.matrices.reserve(g.specs.size() * 14);
  for (std::size_t i = 0; i < g.specs.size(); ++i) {
    auto& sp = g.specs[i];
    const std::uint32_t width = sp.input == HEADSEP_INPUT_FEATURES ? schema->n_features : embed;
    if (g.spec_auto[i] & 1) sp.d_model = width;
    if (g.spec_auto[i] & 2) sp.heads = g.info.heads;
    // Legal but expensive plans (up to the host's 2^27 projection weights: seconds and GBs under
    // ASan) are the host doing as asked, not a finding: keep what is accepted small, but still
    // ask for more than the host allows to test that it refuses.
    {
      const std::uint64_t D = sp.d_model, H = g.info.heads;
      auto weights = [&] { return 2 * H * sp.d_k * D + 2 * H * sp.d_v * D + 3 * D * D; };
      if (weights() > (1u << 20) && weights() <= (std::uint64_t(1) << 27)) sp.d_k = sp.d_v = 1;
      if (weights() > (1u << 20) && weights() <= (std::uint64_t(1) << 27)) sp.d_model = 8;
    }
    const std::uint64_t D = sp.d_model, qk = std::uint64_t(sp.heads) * sp.d_k, v = std::uint64_t(sp.heads) * sp.d_v;
    auto mat = [&](std::uint64_t n, bool nan) -> const float* {
      if (n == 0 || n > (1u << 16)) return nullptr;
      auto& m = g.matrices.emplace_back(n, 0.01f);
      for (std::uint64_t k = 0; k < n; ++k) m[k] = 0.01f * float(k % 13) - 0.05f;
      if (nan) m[n / 2] = std::nanf("");
      return m.data();
    };
    const std::uint8_t mm = g.spec_matrices[i];
    const bool bias = mm & 16;
    if (mm & 3) {
      const bool nan = (mm & 3) == 3;
      sp.w_q = mat(qk * D, false);
      sp.w_k = (mm & 3) == 2 ? nullptr : mat(qk * D, nan);
      sp.w_v = (mm & 3) == 2 ? nullptr : mat(v * D, false);
      sp.b_q = bias ? mat(qk, false) : nullptr;
      sp.b_k = bias ? mat(qk, false) : nullptr;
      sp.b_v = bias ? mat(v, false) : nullptr;
      sp.w_o = mm & 32 ? mat(D * v, false) : nullptr;
      sp.b_o = (mm & 32) && bias ? mat(D, false) : nullptr;
    }
    if ((mm >> 2) & 3) {
      const bool nan = ((mm >> 2) & 3) == 3;
      sp.s_w_q = mat(D * D, false);
      sp.s_w_k = ((mm >> 2) & 3) == 2 ? nullptr : mat(D * D, nan);
      sp.s_w_v = ((mm >> 2) & 3) == 2 ? nullptr : mat(D * D, false);
      sp.s_b_q = bias ? mat(D, false) : nullptr;
      sp.s_b_k = bias ? mat(D, false) : nullptr;
      sp.s_b_v = bias ? mat(D, false) : nullptr;
    }
  }
  *state = s;
  return HEADSEP_OK;
}

headsep_status fp_describe_weighting(void*, headsep_weighting_info* info) {
  if (g.describe_w_status != HEADSEP_OK) return fail(g.describe_w_status, "describe_weighting");
  if (!info) {
    violation("describe_weighting(): NULL info");
    return HEADSEP_ERROR;
  }
  *info = g.info;
  return HEADSEP_OK;
}

headsep_status fp_weights(const void*, const headsep_batch_view* b, std::uint32_t slot, double* const* rows) {
  if (!b || !rows || !b->token_offset) {
    violation("weights(): NULL batch, rows or offsets");
    return HEADSEP_ERROR;
  }
  if (b->token_offset[0] != 0 || b->token_offset[b->n_reports] != b->n_tokens) violation("weights(): offsets do not match n_tokens");
  if (b->n_features && !b->features) violation("weights(): NULL feature columns");
  const bool has_flags = g.info.struct_size >= offsetof(headsep_weighting_info, flags) + sizeof(g.info.flags);
  const std::uint32_t flags = has_flags ? g.info.flags : 0u;
  const bool all = slot == HEADSEP_SLOT_ALL, shared = flags & HEADSEP_WEIGHTING_SHARED_BASELINE;
  if (all && !(flags & HEADSEP_WEIGHTING_ALL_SLOTS)) violation("weights(): every slot asked of a scheme that did not declare it");
  if (g.weights_status != HEADSEP_OK) return fail(g.weights_status, "weights");
  const std::uint64_t n_slots = !all ? 1 : g.info.n_scenarios ? g.info.n_scenarios : std::max<std::uint32_t>(1, b->n_scenarios);
  const std::uint64_t per_slot = std::uint64_t(g.info.heads) + 1;
  const bool per_query = b->struct_size >= offsetof(headsep_batch_view, query_offset) + sizeof(void*) && b->query_offset;
  for (std::uint64_t i = 0; i < n_slots * per_slot; ++i) {
    const std::uint64_t h = i % per_slot, sl = all ? i / per_slot : slot;
    // NULL exactly where the shared baseline says (row 0 of a later slot).
    const bool may_be_null = shared && h == 0 && sl > 0;
    if (!rows[i] && !may_be_null) violation("weights(): a NULL row the flags do not allow");
    if (!rows[i]) continue;
    for (std::uint64_t r = 0; r < b->n_reports; ++r) {
      const std::uint64_t n = b->token_offset[r + 1] - b->token_offset[r];
      const std::uint64_t at = per_query ? b->query_offset[r] : b->token_offset[r];
      const std::uint64_t len = per_query ? n * n : n;
      for (std::uint64_t k = 0; k < len; ++k) rows[i][at + k] = g.weight_values % 4 == 1 ? -1.0 : 1.0 / double(n);
    }
  }
  return HEADSEP_OK;
}

void fp_destroy(void* state) { delete static_cast<State*>(state); }

}  // namespace

extern "C" {

/// Decodes `data` into the script every later call follows. `st_dir`: a folder holding the
/// tests/data safetensors fixtures, for specs that name a weights file.
HEADSEP_PLUGIN_EXPORT void headsep_fuzz_plugin_set_input(const std::uint8_t* data, std::size_t size, const char* st_dir) {
  g = Script{};
  g.st_dir = st_dir ? st_dir : "";
  g_violation.clear();
  fuzzplug::decode(data, size, g);
  auto& d = g.d;
  const std::uint32_t off = g.null_functions;
  d.last_error = off & 1 ? nullptr : +[]() -> const char* { return g.error_text; };
  d.open = off & 2 ? nullptr : &fp_open;
  d.describe = off & 4 ? nullptr : &fp_describe;
  d.next_chunk = off & 8 ? nullptr : &fp_next_chunk;
  d.close = off & 16 ? nullptr : &fp_close;
  d.create = off & 32 ? nullptr : &fp_create;
  d.describe_weighting = off & 64 ? nullptr : &fp_describe_weighting;
  d.weights = off & 128 ? nullptr : &fp_weights;
  d.destroy = off & 256 ? nullptr : &fp_destroy;
}

/// The first broken host promise the plugin saw since the last set_input, or NULL.
HEADSEP_PLUGIN_EXPORT const char* headsep_fuzz_plugin_violation(void) { return g_violation.empty() ? nullptr : g_violation.c_str(); }

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) { return &g.d; }

}  // extern "C"
