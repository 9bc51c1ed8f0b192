// fuzzplug.so — a plugin whose every declaration and behaviour comes from fuzz bytes, so the
// host's checks (runtime/host/plugin_host.cpp load_entry, the schema, chunk and weighting-info checks,
// runtime/host/attention_spec.cpp plan_from_spec) run exactly as for a real plugin, through the
// real dlopen path, without a private entry point into the host.
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
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "headsep/plugin.h"

namespace {

class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= std::uint32_t(u8()) << (8 * k);
    return v;
  }
  std::uint64_t u64() { return std::uint64_t(u32()) | std::uint64_t(u32()) << 32; }
  // Byte 0 (and the end of the input) picks the first, well-formed choice; 0xff a raw value.
  std::uint32_t pick(std::initializer_list<std::uint32_t> t) {
    const std::uint8_t b = u8();
    if (b == 0xff) return u32();
    return t.begin()[b % t.size()];
  }
  std::uint64_t pick64(std::initializer_list<std::uint64_t> t) {
    const std::uint8_t b = u8();
    if (b == 0xff) return u64();
    return t.begin()[b % t.size()];
  }
  std::string raw(std::size_t max) {
    std::string s;
    const std::size_t n = u8() % (max + 1);
    for (std::size_t k = 0; k < n && i_ < n_; ++k) s += static_cast<char>(p_[i_++]);
    return s;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

constexpr std::uint32_t kThrow = 99;  // a status that makes the function throw a C++ exception instead

// One step of a next_chunk program.
struct Op {
  std::uint8_t kind = 0;  // see run_op
  std::uint32_t a = 0, b = 0;
  std::uint64_t n = 0;
  std::uint8_t mode = 0;
  const char* text = nullptr;
  std::uint64_t len = 0;
};
struct Chunk {
  std::vector<Op> ops;
  std::int32_t status = HEADSEP_OK;
};

struct Script {
  std::deque<std::string> strings;  // owns every string handed out (deque: stable addresses)
  headsep_plugin_descriptor d{};
  std::vector<headsep_param_spec> params;
  const char* error_text = nullptr;
  std::int32_t open_status = HEADSEP_OK, describe_status = HEADSEP_OK;
  bool null_state = false;
  // scenario generators
  headsep_schema schema{};
  std::vector<const char*> features, scenarios;
  std::vector<Chunk> chunks;
  std::uint8_t after_end = 0;  // 0: END, 1: data again (chunk 0's program), 2: ERROR
  // weighting schemes
  headsep_weighting_info info{};
  std::vector<const char*> designs;
  std::vector<headsep_attention_spec> specs;
  std::vector<std::uint8_t> spec_auto, spec_matrices;  // per spec: fields fixed at create(), matrix mode
  std::vector<std::vector<float>> matrices;
  std::int32_t create_status = HEADSEP_OK, describe_w_status = HEADSEP_OK, weights_status = HEADSEP_OK;
  std::uint8_t weight_values = 0;
  std::uint32_t null_functions = 0;  // bit i: the i-th function field of the descriptor is NULL
  std::string st_dir;
};

Script g;                 // the current script (set_input replaces it; only ever touched by the harness thread)
std::string g_violation;  // first broken host promise seen

void violation(const std::string& what) {
  if (g_violation.empty()) g_violation = what;
}

const char* keep(Script& s, std::string v) { return s.strings.emplace_back(std::move(v)).c_str(); }

// A string field: byte 0 = the well-formed `good`, else a mistake from the host's rule list.
const char* str(Reader& r, Script& s, const std::string& good) {
  switch (r.u8() % 16) {
    case 1: return nullptr;
    case 2: return keep(s, "");
    case 3: return keep(s, good + "\xff\xfe");
    case 4: return keep(s, std::string(4097, 'a'));
    case 5: return keep(s, std::string(65, 'a'));
    case 6: return keep(s, good + ".dot");
    case 7: return keep(s, "Upper" + good);
    case 8: return keep(s, "scenario");
    case 9: return keep(s, "weighting");
    case 10: case 11: case 12: {
      std::string v = r.raw(24);
      v.erase(std::find(v.begin(), v.end(), '\0'), v.end());
      return keep(s, v);
    }
    default: return keep(s, good);
  }
}

// A name table of a declared count: a count over any limit gets a one-entry array (the host must
// refuse the count before it reads the entries).
void names(Reader& r, Script& s, std::uint32_t n, std::vector<const char*>& out, const char* stem) {
  const std::uint32_t real = n <= 4096 ? n : 1;
  out.assign(real, nullptr);
  for (std::uint32_t i = 0; i < real; ++i) {
    const std::string good = std::string(stem) + std::to_string(i);
    out[i] = i < 16 ? str(r, s, good) : keep(s, good);
  }
  if (real >= 2 && r.u8() == 1) out[real - 1] = out[0];  // a duplicate
}

std::string good_default(std::uint32_t type) {
  switch (type) {
    case HEADSEP_PARAM_INT: return "4";
    case HEADSEP_PARAM_FLOAT: return "0.5";
    case HEADSEP_PARAM_BOOL: return "true";
    default: return "x";
  }
}

void decode(Reader& r, Script& s) {
  auto& d = s.d;
  d.abi_major = r.pick({HEADSEP_PLUGIN_ABI_MAJOR, 0, 2, 0xffffffffu});
  d.abi_minor = r.pick({HEADSEP_PLUGIN_ABI_MINOR, 0, 2, 1000});
  d.struct_size = r.pick({sizeof(headsep_plugin_descriptor), offsetof(headsep_plugin_descriptor, kind) + 4,
                          offsetof(headsep_plugin_descriptor, version), offsetof(headsep_plugin_descriptor, n_params),
                          offsetof(headsep_plugin_descriptor, last_error), offsetof(headsep_plugin_descriptor, open),
                          offsetof(headsep_plugin_descriptor, next_chunk), offsetof(headsep_plugin_descriptor, create),
                          offsetof(headsep_plugin_descriptor, weights), offsetof(headsep_plugin_descriptor, destroy),
                          sizeof(headsep_plugin_descriptor) + 64, 0, 12, 15});
  d.kind = r.pick({HEADSEP_KIND_SCENARIO, HEADSEP_KIND_WEIGHTING, 0, 3});
  d.name = str(r, s, "fuzzplug");
  d.version = str(r, s, "1.0");
  d.description = str(r, s, "fuzz plugin");
  d.n_params = r.pick({0, 1, 2, 3, 4, 256, 257, 0xffffffffu});
  const std::uint32_t n_params = d.n_params <= 256 ? d.n_params : 1;
  s.params.assign(n_params, headsep_param_spec{});
  for (std::uint32_t i = 0; i < n_params; ++i) {
    auto& p = s.params[i];
    p.type = r.pick({HEADSEP_PARAM_INT, HEADSEP_PARAM_STRING, HEADSEP_PARAM_FLOAT, HEADSEP_PARAM_BOOL, 0, 5});
    if (i < 8) {
      p.name = str(r, s, "p" + std::to_string(i));
      p.default_value = str(r, s, good_default(p.type));
      p.help = str(r, s, "help");
    } else {
      p.name = keep(s, "p" + std::to_string(i));
      p.default_value = keep(s, good_default(p.type));
    }
  }
  if (n_params >= 2 && r.u8() == 1) s.params[n_params - 1].name = s.params[0].name;  // declared twice
  d.params = r.u8() == 1 ? nullptr : s.params.data();
  s.error_text = str(r, s, "fuzz failure");
  s.open_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, HEADSEP_END, kThrow, 7}));
  s.null_state = r.u8() == 1;

  // describe(): the schema.
  auto& sc = s.schema;
  sc.struct_size = r.pick({sizeof(headsep_schema), offsetof(headsep_schema, d_model), 0, 8, sizeof(headsep_schema) + 16});
  sc.flags = r.pick({0, HEADSEP_SCHEMA_RANDOM_ACCESS, HEADSEP_SCHEMA_NAMES_SCENARIOS,
                     HEADSEP_SCHEMA_RANDOM_ACCESS | HEADSEP_SCHEMA_NAMES_SCENARIOS, 0xff});
  sc.n_features = r.pick({2, 0, 1, 3, 4097, 0xffffffffu});
  names(r, s, sc.n_features, s.features, "f");
  sc.feature_names = r.u8() == 1 ? nullptr : s.features.data();
  sc.n_scenarios = r.pick({0, 1, 2, 3, 4097, 0xffffffffu});
  names(r, s, sc.n_scenarios, s.scenarios, "s");
  sc.scenario_names = r.u8() == 1 ? nullptr : s.scenarios.data();
  sc.given_heads = r.pick({0, 1, 2, 1024, 1025, 0xffffffffu});
  sc.total_reports = r.pick64({0, 3, 1, 7, 0xffffffffffffffffull});
  sc.d_model = r.pick({0, 8, 1, 65537});
  s.describe_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow}));

  // next_chunk(): a program per chunk index.
  const std::uint32_t n_chunks = 1 + r.u8() % 4;
  s.chunks.resize(n_chunks);
  for (auto& c : s.chunks) {
    const std::uint32_t n_ops = 1 + r.u8() % 6;
    for (std::uint32_t k = 0; k < n_ops; ++k) {
      Op op;
      op.kind = r.u8() % 11;
      op.a = r.u8();
      op.b = r.u8();
      op.mode = r.u8();
      if (op.kind == 3 || op.kind == 5 || op.kind == 6) {
        op.text = str(r, s, "t" + std::to_string(k));
        op.len = op.text ? std::strlen(op.text) : (op.mode & 1 ? 5 : 0);
      }
      c.ops.push_back(op);
    }
    c.status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_END, HEADSEP_ERROR, kThrow, 7}));
  }
  s.after_end = r.u8() % 3;

  // Weighting schemes.
  s.create_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow}));
  auto& wi = s.info;
  wi.struct_size = r.pick({sizeof(headsep_weighting_info), offsetof(headsep_weighting_info, attention), 8, 0});
  wi.heads = r.pick({2, 1, 3, 0, 1024, 1025, 0xffffffffu});
  wi.layout = r.pick({HEADSEP_LAYOUT_PER_TOKEN, HEADSEP_LAYOUT_PER_QUERY, 2});
  wi.n_scenarios = r.pick({0, 1, 2, 4097, 0xffffffffu});
  names(r, s, wi.n_scenarios, s.designs, "design");
  wi.scenario_names = r.u8() == 1 ? nullptr : s.designs.data();
  if (r.u8() % 2 == 1 && wi.n_scenarios <= 4096) {
    const std::uint32_t n_specs = wi.n_scenarios ? wi.n_scenarios : 1;
    s.specs.assign(n_specs, headsep_attention_spec{});
    s.spec_auto.assign(n_specs, 0);
    s.spec_matrices.assign(n_specs, 0);
    for (std::uint32_t i = 0; i < n_specs && i < 8; ++i) {
      auto& sp = s.specs[i];
      sp.struct_size = r.pick({sizeof(headsep_attention_spec), offsetof(headsep_attention_spec, weights_path),
                               offsetof(headsep_attention_spec, weights_path) - 1, offsetof(headsep_attention_spec, seed),
                               offsetof(headsep_attention_spec, w_q), offsetof(headsep_attention_spec, s_w_q), 0});
      sp.input = r.pick({HEADSEP_INPUT_FEATURES, HEADSEP_INPUT_EMBEDDINGS, 2});
      s.spec_auto[i] = r.u8();  // bit 0: d_model = the input's width; bit 1: heads = the scheme's
      sp.d_model = r.pick({0, 1, 8, 65536, 65537});
      sp.heads = r.pick({0, 1, 2, 1025});
      sp.d_k = r.pick({2, 1, 0, 16, 65536, 65537});
      sp.d_v = r.pick({2, 1, 0, 16, 65536, 65537});
      sp.query = r.pick({HEADSEP_QUERY_ALL, HEADSEP_QUERY_FIRST, HEADSEP_QUERY_LAST, HEADSEP_QUERY_INDEX, 9});
      sp.query_index = static_cast<std::int32_t>(r.pick({0, 1, 0xffffffffu, 0x80000000u}));
      sp.mask = r.pick({HEADSEP_MASK_NONE, HEADSEP_MASK_CAUSAL, 2});
      const std::uint32_t w = r.pick({0, 1, 2, 3, 4});
      sp.weights_path = w == 1 ? keep(s, "") : w == 2 ? keep(s, "/nonexistent/w.safetensors")
                        : w == 3 ? keep(s, s.st_dir + "/mha_small.safetensors")
                        : w == 4 ? keep(s, s.st_dir + "/mha_small_dtypes.safetensors") : nullptr;
      const std::uint32_t b = r.pick({0, 1, 2, 3});
      sp.baseline_path = b == 1 ? keep(s, s.st_dir + "/mha_small_single.safetensors")
                         : b == 2 ? keep(s, "/nonexistent/b.safetensors")
                         : b == 3 ? keep(s, s.st_dir + "/mha_small.safetensors") : nullptr;
      sp.seed = r.u8();
      s.spec_matrices[i] = r.u8();  // bits 0-1: heads' matrices (none, all, w_q only, all with a NaN);
                                    // bits 2-3: the same for the baseline; bit 4: biases; bit 5: w_o
    }
    wi.attention = s.specs.data();
  }
  s.describe_w_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow}));
  s.weights_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow, 5}));
  s.weight_values = r.u8();

  // Required function fields NULL now and then: a byte >= 0xf0, then a mask (set_input applies it).
  s.null_functions = r.u8() >= 0xf0 ? r.u32() : 0;

  // ABI 1.2/1.3 weighting promises (read by the host only when struct_size reaches `flags`),
  // unknown bits included. Decoded last, so inputs saved before it existed decode as before.
  s.info.flags = r.pick({0u, HEADSEP_WEIGHTING_SHARED_BASELINE, HEADSEP_WEIGHTING_ALL_SLOTS,
                         HEADSEP_WEIGHTING_SHARED_BASELINE | HEADSEP_WEIGHTING_ALL_SLOTS, 0x80000000u});
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
  Reader r(data, size);
  decode(r, g);
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
