// Semantic and direction axes (headsep/context_axes.hpp): files read and checked, the semantic
// axes' per-id values and the directions' per-layer rows laid out for run_model.
#include "headsep/context_axes.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "headsep/architecture.hpp"
#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "headsep/tokenizer.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

std::string name_of(std::string_view s) { return "'" + printable(s, 200) + "'"; }

void check_new_name(const ModelAxes& out, const std::string& name, const std::string& where) {
  if (name.empty()) throw Error(where + ": an axis name is empty");
  const auto names = out.names();
  if (std::find(names.begin(), names.end(), name) != names.end())
    throw Error(where + ": axis " + name_of(name) + " is already defined by another source (each axis has one source)");
}

/// The ids the tokenizer gives `word` mid-sentence: the word tokens of "a WORD" after those of "a"
/// (special, template and whitespace tokens dropped).
std::vector<std::uint32_t> word_ids(const TextTokenizer& tok, const std::string& word, const std::string& where) {
  Encoding prefix, e;
  tok.encode("a", prefix);
  try {
    tok.encode("a " + word, e);
  } catch (const Error& err) {
    throw Error(where + ": " + err.what());
  }
  if (e.truncated) throw Error(where + ": the word is longer than the tokenizer's truncation length");
  std::size_t skip = 0;
  for (std::uint32_t w : prefix.word) skip += w != Encoding::kNoWord;
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    if (e.word[i] == Encoding::kNoWord) continue;
    if (skip) { --skip; continue; }
    ids.push_back(e.ids[i]);
  }
  if (ids.empty()) throw Error(where + ": the tokenizer gives the word no token");
  std::vector<std::int64_t> unknown{tok.find("[UNK]"), tok.find("<unk>")};
  if (std::all_of(ids.begin(), ids.end(), [&](std::uint32_t id) {
        return std::find(unknown.begin(), unknown.end(), std::int64_t(id)) != unknown.end();
      }))
    throw Error(where + ": the tokenizer maps the word to unknown tokens only");
  return ids;
}

/// The mean of the words' vectors (each the mean of its tokens' embedding rows), in double.
std::vector<double> pole(const nlohmann::json& words, const std::string& where, const TextTokenizer& tok,
                         const float* emb, std::size_t D, std::uint32_t vocab) {
  if (!words.is_array() || words.empty()) throw Error(where + ": expected a non-empty list of words");
  std::vector<double> mean(D, 0.0);
  for (const auto& w : words) {
    if (!w.is_string()) throw Error(where + ": " + printable(w.dump(), 200) + " is not a string");
    const std::string word = w.get<std::string>();
    const auto ids = word_ids(tok, word, where + " word " + name_of(word));
    std::vector<double> v(D, 0.0);
    for (std::uint32_t id : ids) {
      if (id >= vocab)
        throw Error(where + " word " + name_of(word) + ": token id " + std::to_string(id) + " is past the embedding table");
      for (std::size_t i = 0; i < D; ++i) v[i] += emb[std::size_t(id) * D + i];
    }
    for (std::size_t i = 0; i < D; ++i) mean[i] += v[i] / double(ids.size());
  }
  for (double& x : mean) x /= double(words.size());
  return mean;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

}  // namespace

bool punctuation_word(std::string_view w) noexcept {
  if (w.empty()) return false;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(w.data());
  for (utf8proc_ssize_t i = 0, n = static_cast<utf8proc_ssize_t>(w.size()); i < n;) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &c);
    if (len <= 0) return false;
    i += len;
    const bool ascii_symbol = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    const auto k = utf8proc_category(c);
    if (!ascii_symbol && !(k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO)) return false;
  }
  return true;
}

std::vector<std::string> ModelAxes::names() const {
  std::vector<std::string> n = semantic;
  n.insert(n.end(), direction.begin(), direction.end());
  return n;
}

void add_semantic_axes(std::string_view json_text, const std::string& file, const TextTokenizer& tok,
                       const Architecture& model, ModelAxes& out) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": not valid JSON (" + json_error_text(e.what()) + ")");
  }
  if (!j.is_object() || j.empty())
    throw Error(file + ": expected a JSON object {\"axis\": {\"plus\": [words], \"minus\": [words]}, ...}");
  const std::size_t D = model.shape().hidden, V = model.shape().vocab_size;
  const float* emb = model.input_embeddings();
  std::vector<std::vector<double>> us;
  std::vector<std::string> names;
  for (const auto& [name, poles] : j.items()) {
    const std::string where = file + ": axis " + name_of(name);
    check_new_name(out, name, file);
    if (std::find(names.begin(), names.end(), name) != names.end()) throw Error(where + ": defined twice");
    if (!poles.is_object() || !poles.contains("plus") || !poles.contains("minus") || poles.size() != 2)
      throw Error(where + ": expected {\"plus\": [words], \"minus\": [words]}");
    const auto plus = pole(poles["plus"], where + " plus", tok, emb, D, V);
    const auto minus = pole(poles["minus"], where + " minus", tok, emb, D, V);
    std::vector<double> u(D);
    for (std::size_t i = 0; i < D; ++i) u[i] = plus[i] - minus[i];
    const double n = norm(u);
    if (!(n > 1e-12 * (norm(plus) + norm(minus))))
      throw Error(where + ": the plus and minus words' vectors cancel (|u| = 0): the poles must differ");
    for (double& x : u) x /= n;
    us.push_back(std::move(u));
    names.push_back(name);
  }
  // Per id the cosine with every axis: the old axes' columns kept, the new ones appended.
  const std::size_t K0 = out.semantic.size(), K = K0 + us.size();
  std::vector<float> values(V * K);
  for (std::size_t id = 0; id < V; ++id) {
    const float* e = emb + id * D;
    double ee = 0;
    for (std::size_t i = 0; i < D; ++i) ee += double(e[i]) * double(e[i]);
    for (std::size_t k = 0; k < K0; ++k) values[id * K + k] = out.semantic_values[id * K0 + k];
    for (std::size_t k = 0; k < us.size(); ++k) {
      double eu = 0;
      for (std::size_t i = 0; i < D; ++i) eu += double(e[i]) * us[k][i];
      values[id * K + K0 + k] = ee > 0 ? static_cast<float>(eu / std::sqrt(ee)) : 0.0f;  // a zero row: 0
    }
  }
  out.semantic_values = std::move(values);
  for (auto& n : names) out.semantic.push_back(std::move(n)), out.semantic_from.push_back(file);
}

void add_direction_axes(const std::vector<DirectionTensor>& tensors, const std::string& where,
                        const Architecture& model, ModelAxes& out) {
  if (tensors.empty()) throw Error(where + ": no direction (expected one tensor per axis, [hidden] or [layers, hidden])");
  const std::size_t L = model.shape().layers, D = model.shape().hidden;
  const std::size_t K0 = out.direction.size(), K = K0 + tensors.size();
  std::vector<float> dirs(L * K * D);
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t k = 0; k < K0; ++k)
      std::copy_n(out.directions.data() + (l * K0 + k) * D, D, dirs.data() + (l * K + k) * D);
  std::vector<std::string> names;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const DirectionTensor& t = tensors[k];
    const std::string at = where + ": axis " + name_of(t.name);
    check_new_name(out, t.name, where);
    if (std::find(names.begin(), names.end(), t.name) != names.end()) throw Error(at + ": defined twice");
    const bool every = t.shape.size() == 1 && t.shape[0] == D;
    const bool per_layer = t.shape.size() == 2 && t.shape[0] == L && t.shape[1] == D;
    if (!every && !per_layer)
      throw Error(at + ": shape " + shape_string(t.shape) + ", expected [hidden] = [" + std::to_string(D) +
                  "] or [layers, hidden] = [" + std::to_string(L) + ", " + std::to_string(D) + "] for this model");
    if (t.values.size() != (every ? D : L * D)) throw Error(at + ": the values do not fill the shape");
    for (std::size_t i = 0; i < t.values.size(); ++i)
      if (!std::isfinite(t.values[i]))
        throw Error(at + ": element " + std::to_string(i) + " is not finite");
    for (std::size_t l = 0; l < L; ++l) {
      const float* u = t.values.data() + (every ? 0 : l * D);
      if (std::all_of(u, u + D, [](float x) { return x == 0.0f; }))
        throw Error(at + ": the direction of layer " + std::to_string(l) + " is zero (|u| = 0)");
      std::copy_n(u, D, dirs.data() + (l * K + K0 + k) * D);
    }
    names.push_back(t.name);
  }
  out.directions = std::move(dirs);
  for (auto& n : names) out.direction.push_back(std::move(n)), out.direction_from.push_back(where);
}

void add_direction_axes(const std::filesystem::path& file, const Architecture& model, ModelAxes& out) {
  const SafeTensors st(file);
  std::vector<DirectionTensor> tensors;
  for (const TensorInfo& info : st.tensors()) {
    if (!readable_as_f32(info.dtype))
      throw st.error(info.name, "dtype is not f32, f16, bf16 or f64");
    DirectionTensor t{info.name, info.shape, {}};
    // Shape checked in add_direction_axes (naming the model's sizes); non-finite values there too.
    t.values = st.read_f32(info.name, std::nullopt, SafeTensors::NonFinite::allow);
    tensors.push_back(std::move(t));
  }
  add_direction_axes(tensors, st.file(), model, out);
}

}  // namespace headsep
