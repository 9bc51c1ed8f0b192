// Loading a model folder (model/weights.hpp): config.json fields, one or sharded safetensors
// files, the panel kernel's packing; and load_model, which picks the architecture by model_type.
#include "model/weights.hpp"

#include <bit>
#include <cmath>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif
#include <fstream>
#include <sstream>

#include "headsep/bert.hpp"
#include "headsep/error.hpp"
#include "kernels/attention_simd.hpp"
#include "model/family.hpp"
#include "profile/memory.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace model {

std::uint32_t json_uint(const json& j, const char* key, const std::string& file, std::int64_t def) {
  if (!j.contains(key)) {
    if (def >= 0) return static_cast<std::uint32_t>(def);
    throw Error(file + ": '" + key + "' is missing");
  }
  const json& v = j[key];
  // Compared in the value's own width: 4294967306 must not read as 10 (nor 2^64 - 1 as -1).
  const bool ok = v.is_number_unsigned() ? v.get<std::uint64_t>() - 1 < (std::uint64_t(1) << 24)
                                         : v.is_number_integer() && v.get<std::int64_t>() > 0 &&
                                               v.get<std::int64_t>() <= (std::int64_t(1) << 24);
  if (!ok) throw Error(file + ": '" + key + "' must be a positive integer (at most 2^24), got " + json_brief(v));
  return static_cast<std::uint32_t>(v.get<std::uint64_t>());
}

std::uint32_t json_uint_alias(const json& j, const char* key, const char* alias, const std::string& file) {
  const bool has_key = j.contains(key) && !j[key].is_null(), has_alias = j.contains(alias) && !j[alias].is_null();
  if (!has_key && has_alias) return json_uint(j, alias, file);
  const std::uint32_t v = json_uint(j, key, file);  // (missing: named by key)
  if (has_alias && json_uint(j, alias, file) != v)
    throw Error(file + ": '" + key + "' (" + std::to_string(v) + ") and '" + alias + "' (" +
                std::to_string(json_uint(j, alias, file)) + ") disagree: they name the same size");
  return v;
}

std::string json_str(const json& j, const char* key, const std::string& file, const char* def) {
  if (!j.contains(key)) return def;
  if (!j[key].is_string()) throw Error(file + ": '" + key + "' must be a string, got " + json_brief(j[key]));
  return j[key].get<std::string>();
}

double json_positive(const json& j, const char* key, const std::string& file, double def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  const json& v = j[key];
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    throw Error(file + ": '" + key + "' must be a positive number, got " + json_brief(v));
  return v.get<double>();
}

bool json_bool(const json& j, const char* key, const std::string& file, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) throw Error(file + ": '" + key + "' must be true or false, got " + json_brief(j[key]));
  return j[key].get<bool>();
}

const json* json_object(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return nullptr;
  if (!j[key].is_object()) throw Error(file + ": '" + key + "' must be an object, got " + json_brief(j[key]));
  return &j[key];
}

namespace {
/// FILE parsed as a JSON object; `missing` completes "FILE: cannot open".
json read_object(const std::filesystem::path& path, const std::string& missing) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(file + ": cannot open" + missing);
  std::ostringstream ss;
  ss << in.rdbuf();
  const json j = parse_json(ss.str(), file);
  if (!j.is_object()) throw Error(file + ": expected a JSON object");
  return j;
}
}  // namespace

json read_config(const std::filesystem::path& dir, std::string& file) {
  file = (dir / "config.json").string();
  return read_object(dir / "config.json", " (a model folder needs config.json and model.safetensors)");
}

std::string folder_name(const std::filesystem::path& dir) {
  return dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
}

std::shared_ptr<const float> pack_linear(const std::vector<float>& w, const std::vector<float>& b, std::size_t out,
                                         std::size_t in) {
  std::vector<float> t(in * out);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i) t[i * out + o] = w[o * in + i];
  return kernels::pack_panels(t.data(), in, out, b.empty() ? nullptr : b.data());
}

kernels::PackedLinear pack_linear(const std::vector<float>& w, const std::vector<float>& b, std::size_t out,
                                  std::size_t in, kernels::WeightType type) {
  const float* bias = b.empty() ? nullptr : b.data();
  if (type == kernels::WeightType::f32) return kernels::pack_linear_f32(w.data(), bias, out, in);
  kernels::PackedLinear p = kernels::alloc_linear_bf16(out, in, type);
  kernels::pack_rows_bf16(p, w.data(), bias, 0, out);
  return p;
}

FolderWeights::FolderWeights(const std::filesystem::path& dir) {
  const auto single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(single) || !std::filesystem::exists(index)) {
    files_.emplace_back(single);  // a missing file is SafeTensors' error, naming it
    return;
  }
  index_ = index.string();
  const json j = read_object(index, "");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(index_ + ": expected an object with a 'weight_map' object (tensor name -> shard file)");
  std::map<std::string, std::size_t> shard;
  for (const auto& [tensor, f] : j["weight_map"].items()) {
    if (!f.is_string() || f.get<std::string>().find('/') != std::string::npos || f.get<std::string>().empty())
      throw Error(index_ + ": weight_map['" + printable(tensor, 200) + "'] must be a file name in the folder, got " +
                  json_brief(f));
    auto [it, fresh] = shard.emplace(f.get<std::string>(), files_.size());
    if (fresh) files_.emplace_back(dir / it->first);
    if (!files_[it->second].contains(tensor))
      throw Error(index_ + ": tensor '" + printable(tensor, 200) + "' is listed in " + printable(it->first, 200) +
                  ", which does not hold it");
    where_.emplace(tensor, it->second);
  }
}

bool FolderWeights::contains(const std::string& name) const {
  return index_.empty() ? files_[0].contains(name) : where_.count(name) > 0;
}

const SafeTensors& FolderWeights::file_of(const std::string& name) const {
  if (index_.empty()) return files_[0];
  const auto it = where_.find(name);
  if (it == where_.end()) throw Error(index_ + ": tensor '" + name + "': missing (in no shard)");
  return files_[it->second];
}

std::vector<float> FolderWeights::read(const std::string& name, std::vector<std::uint64_t> dims,
                                       const std::string& formula) const {
  const SafeTensors& f = file_of(name);
  auto v = f.read_f32(name, ShapeSpec{std::move(dims), formula});
  f.drop_pages(name);
  return v;
}

std::vector<std::uint16_t> FolderWeights::read_16(const std::string& name, std::vector<std::uint64_t> dims,
                                                  const std::string& formula, DType as) const {
  const SafeTensors& f = file_of(name);
  const TensorInfo& t = f.at(name);
  std::vector<std::uint16_t> out;
  const bool f16 = as == DType::F16;
  if (t.dtype != as || t.shape != dims) {  // (a wrong shape: read's message)
    const auto v = read(name, std::move(dims), formula);
    out.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out[i] = f16 ? kernels::round_f16(v[i]) : kernels::round_bf16(std::bit_cast<std::uint32_t>(v[i]));
    return out;
  }
  const std::uint16_t exp = f16 ? 0x7c00u : 0x7f80u;  // all ones: inf or NaN
  const auto raw = f.raw(name);
  out.resize(raw.size() / 2);
  // Pages given back every 64 MiB: the table and its mapping are never both resident whole.
  constexpr std::size_t kStep = std::size_t(32) << 20;  // elements
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i % kStep == 0 && i) f.drop_pages(name, 0, 2 * i);
    out[i] = static_cast<std::uint16_t>(std::to_integer<unsigned>(raw[2 * i]) | std::to_integer<unsigned>(raw[2 * i + 1]) << 8);
    if ((out[i] & exp) == exp)
      throw f.error(name, "element " + std::to_string(i) + " is " + ((out[i] & 0x7fffu & ~exp) ? "NaN" : out[i] & 0x8000u ? "-inf" : "inf") +
                              " (weights must be finite)");
  }
  f.drop_pages(name);
  return out;
}

DType FolderWeights::dtype(const std::string& name) const { return file_of(name).at(name).dtype; }

std::uint64_t FolderWeights::data_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& f : files_) n += f.data_size();
  return n;
}

kernels::WeightType hold_type(WeightDType dtype, DType common, bool mixed) noexcept {
  if (dtype != WeightDType::automatic) return dtype == WeightDType::bf16 ? kernels::WeightType::bf16 : kernels::WeightType::f32;
  if (mixed) return kernels::WeightType::f32;
  return common == DType::BF16 ? kernels::WeightType::bf16 : common == DType::F16 ? kernels::WeightType::f16 : kernels::WeightType::f32;
}

kernels::WeightType hold_type(WeightDType dtype, const FolderWeights& w, std::initializer_list<std::string> names) {
  const DType first = w.dtype(*names.begin());
  bool mixed = false;
  for (const auto& n : names) mixed = mixed || w.dtype(n) != first;
  return hold_type(dtype, first, mixed);
}

void widen_16(kernels::WeightType type, const std::uint16_t* in, std::size_t n, float* out) noexcept {
  if (type == kernels::WeightType::f16)
    for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(std::uint32_t(in[i]) << 16);
}

HeldTable HeldTable::read(const FolderWeights& w, const std::string& name, std::uint64_t rows, std::uint64_t width,
                          const std::string& formula, WeightDType dtype) {
  HeldTable t;
  t.type = hold_type(dtype, w.dtype(name));
  t.width = width;
  if (t.type == kernels::WeightType::f32) t.f32 = w.read(name, {rows, width}, formula);
  else t.h16 = w.read_16(name, {rows, width}, formula, t.type == kernels::WeightType::f16 ? DType::F16 : DType::BF16);
  return t;
}

void MemoryCount::add(const kernels::PackedLinear& p) {
  m_.held += p.bytes();
  types_[static_cast<int>(p.type)] = true;
}

void give_back_freed() noexcept {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

WeightMemory MemoryCount::done(std::uint64_t file) {
  give_back_freed();
  m_.file = file;
  m_.linear.clear();
  for (int t = 0; t < 3; ++t)
    if (types_[t]) m_.linear += (m_.linear.empty() ? "" : "+") + std::string(t == 0 ? "f32" : t == 1 ? "bf16" : "f16");
  m_.rss_loaded = prof::rss_bytes(), m_.peak_loaded = prof::peak_rss_bytes();
  return m_;
}

}  // namespace model

std::string_view to_string(WeightDType t) noexcept {
  switch (t) {
    case WeightDType::automatic: return "auto";
    case WeightDType::f32: return "f32";
    case WeightDType::bf16: return "bf16";
  }
  return "?";
}

WeightDType parse_weight_dtype(std::string_view name) {
  for (auto t : {WeightDType::automatic, WeightDType::f32, WeightDType::bf16})
    if (name == to_string(t)) return t;
  throw UsageError("unknown weight dtype '" + std::string(name) + "' (expected auto, f32 or bf16)");
}

std::unique_ptr<Architecture> load_model(const std::filesystem::path& dir, WeightDType dtype) {
  std::string file;
  const model::json j = model::read_config(dir, file);
  const std::string type = model::json_str(j, "model_type", file, "");
  if (j.contains("quantization_config"))
    throw Error(file + ": quantized model (quantization_config " +
                model::json_str(j["quantization_config"], "quant_method", file, "?") +
                "): headsep reads f32, f16 and bf16 weights");
  if (const model::Family* f = model::find_family(type))
    return model::load_table_decoder(dir, model::read_decoder_spec(*f, j, file), dtype);
  if (type.empty() || is_encoder_model_type(type)) return std::make_unique<BertModel>(BertModel::load(dir, dtype));
  std::string known = "\"bert\", \"roberta\", \"xlm-roberta\", \"distilbert\"";
  for (const model::Family& f : model::families()) known += std::string(", \"") + f.model_type + "\"";
  throw Error(file + ": unsupported architecture (model_type '" + type + "'): headsep runs " + known);
}

}  // namespace headsep
