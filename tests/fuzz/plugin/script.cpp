// fuzzplug's script decoder: fuzz bytes -> every declaration and behaviour of the plugin (what
// its descriptor, schema, chunks and weighting info say; which calls fail or throw). Fields are
// read in one fixed order, so inputs saved in the corpus keep decoding to the same script.
#include "script.hpp"

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace fuzzplug {

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

// The descriptor (ABI, struct_size, kind, texts, the parameter table) and open()'s behaviour.
void decode_descriptor(Reader& r, Script& s) {
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
}

// describe(): the schema.
void decode_schema(Reader& r, Script& s) {
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
}

// next_chunk(): a program per chunk index.
void decode_chunks(Reader& r, Script& s) {
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
}

// Attention spec i (ABI 1.1): its fields, and how create() fixes it up and gives it matrices.
void decode_spec(Reader& r, Script& s, std::uint32_t i) {
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

// Weighting schemes: create(), describe_weighting()'s info and attention specs, weights().
void decode_weighting(Reader& r, Script& s) {
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
    for (std::uint32_t i = 0; i < n_specs && i < 8; ++i) decode_spec(r, s, i);
    wi.attention = s.specs.data();
  }
  s.describe_w_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow}));
  s.weights_status = static_cast<std::int32_t>(r.pick({HEADSEP_OK, HEADSEP_ERROR, kThrow, 5}));
  s.weight_values = r.u8();
}

}  // namespace

void decode(const std::uint8_t* data, std::size_t size, Script& s) {
  Reader r(data, size);
  decode_descriptor(r, s);
  decode_schema(r, s);
  decode_chunks(r, s);
  decode_weighting(r, s);

  // Required function fields NULL now and then: a byte >= 0xf0, then a mask (set_input applies it).
  s.null_functions = r.u8() >= 0xf0 ? r.u32() : 0;

  // ABI 1.2/1.3 weighting promises (read by the host only when struct_size reaches `flags`),
  // unknown bits included. Decoded last, so inputs saved before it existed decode as before.
  s.info.flags = r.pick({0u, HEADSEP_WEIGHTING_SHARED_BASELINE, HEADSEP_WEIGHTING_ALL_SLOTS,
                         HEADSEP_WEIGHTING_SHARED_BASELINE | HEADSEP_WEIGHTING_ALL_SLOTS, 0x80000000u});
}

}  // namespace fuzzplug
