// Safetensors reading and the attention-weight loader. Why the code looks the way it does:
//  - The whole header is checked in the constructor, so nothing after it can meet a size that
//    overflows, an offset past the mapping or two tensors sharing bytes. Sizes are products of
//    attacker-chosen 64-bit integers: every multiplication is overflow-checked.
//  - The data section starts at byte 8 + N for any N, so tensors are not aligned: elements are
//    assembled from bytes (little-endian by the format), never read through a cast pointer.
//  - The loader first lists every tensor the layout wants with its expected shape and checks all
//    of them (and that no other tensor sits under the prefix) before converting a single value.
#include "headsep/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace headsep {

namespace {

using json = nlohmann::json;

struct DTypeEntry {
  DType type;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},     {DType::I8, "I8", 1},
    {DType::F8_E5M2, "F8_E5M2", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E8M0, "F8_E8M0", 1},
    {DType::I16, "I16", 2},         {DType::U16, "U16", 2},   {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::I32, "I32", 4},   {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},         {DType::I64, "I64", 8},   {DType::U64, "U64", 8},
    {DType::F64, "F64", 8},         {DType::C64, "C64", 8},
};

std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& e : kDTypes)
    if (e.name == s) return e.type;
  return std::nullopt;
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

std::uint64_t load_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}
std::uint32_t load_u32_le(const std::byte* p) {
  return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
         std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}
std::uint16_t load_u16_le(const std::byte* p) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) | std::to_integer<unsigned>(p[1]) << 8);
}

/// IEEE binary16 -> binary32, exact for every value (subnormals included; NaN payloads kept).
float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    // Subnormal or zero: mant * 2^-24 is exact in f32 (a normal number there).
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

float bf16_to_f32(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

std::string index_string(std::uint64_t flat, std::span<const std::uint64_t> shape) {
  if (shape.size() < 2) return std::to_string(flat);
  std::vector<std::uint64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_string(idx);
}

}  // namespace

// ---- dtypes ------------------------------------------------------------------------------------

std::string_view to_string(DType t) noexcept {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.name;
  return "?";
}

std::size_t dtype_size(DType t) noexcept {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.size;
  return 0;
}

bool readable_as_f32(DType t) noexcept {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

std::string shape_string(std::span<const std::uint64_t> dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// ---- SafeTensors -------------------------------------------------------------------------------

Error SafeTensors::error(std::string_view tensor, std::string_view what) const {
  std::string m = file_;
  m += ": ";
  if (!tensor.empty()) m.append("tensor '").append(tensor).append("': ");
  m += what;
  return Error(m);
}

SafeTensors::SafeTensors(const std::filesystem::path& file) : file_(file.string()) {
  const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw error({}, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw error({}, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw error({}, "not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw error({}, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) throw error({}, std::string("cannot map: ") + std::strerror(map_errno));
  map_ = static_cast<const std::byte*>(p);
  map_size_ = size;

  try {
    const std::uint64_t n = load_u64_le(map_);
    if (n > size - 8)
      throw error({}, "header length " + std::to_string(n) + " runs past the end of the file (" +
                          std::to_string(size) + " bytes)");
    if (n > kSafeTensorsMaxHeader)
      throw error({}, "header length " + std::to_string(n) + " is absurd (more than " +
                          std::to_string(kSafeTensorsMaxHeader) + " bytes)");
    if (n < 2 || std::to_integer<char>(map_[8]) != '{')
      throw error({}, "header is not a JSON object (it must start with '{')");
    data_ = map_ + 8 + n;
    data_size_ = size - 8 - n;

    // Duplicate top-level keys would be silently merged by the parser: count them as it reads.
    std::set<std::string> seen;
    std::string duplicate;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
      }
      return true;
    };
    json header;
    const char* h = reinterpret_cast<const char*>(map_ + 8);
    try {
      header = json::parse(h, h + n, cb);
    } catch (const json::exception& e) {
      throw error({}, std::string("invalid JSON header: ") + e.what());
    }
    if (!header.is_object()) throw error({}, "header is not a JSON object");
    if (!duplicate.empty()) throw error(duplicate, "appears twice in the header");

    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const json& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) throw error({}, "__metadata__ is not a JSON object");
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m->is_string()) throw error({}, "__metadata__ entry '" + m.key() + "' is not a string");
          metadata_.emplace(m.key(), m->get<std::string>());
        }
        continue;
      }
      if (!v.is_object()) throw error(name, "entry is not a JSON object");
      for (auto k = v.begin(); k != v.end(); ++k)
        if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
          throw error(name, "unexpected key '" + k.key() + "' (an entry has dtype, shape and data_offsets)");
      TensorInfo t;
      t.name = name;

      const auto dt = v.find("dtype");
      if (dt == v.end() || !dt->is_string()) throw error(name, "no dtype string");
      const auto type = parse_dtype(dt->get_ref<const std::string&>());
      if (!type) throw error(name, "unknown dtype '" + dt->get<std::string>() + "'");
      t.dtype = *type;

      const auto sh = v.find("shape");
      if (sh == v.end() || !sh->is_array()) throw error(name, "no shape array");
      for (const json& d : *sh) {
        if (!d.is_number_unsigned())
          throw error(name, "shape " + sh->dump() + " has a dimension that is not a non-negative integer");
        t.shape.push_back(d.get<std::uint64_t>());
        if (mul_overflows(t.elements, t.shape.back(), t.elements))
          throw error(name, "shape " + sh->dump() + " has more than 2^64 elements");
      }

      const auto off = v.find("data_offsets");
      if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
          !(*off)[1].is_number_unsigned())
        throw error(name, "data_offsets is not [begin, end] with non-negative integers");
      t.begin = (*off)[0].get<std::uint64_t>();
      t.end = (*off)[1].get<std::uint64_t>();
      const std::string offs = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
      if (t.begin > t.end) throw error(name, offs + ": begin after end");
      if (t.end > data_size_)
        throw error(name, offs + " outside the data section (" + std::to_string(data_size_) + " bytes)");
      std::uint64_t bytes = 0;
      if (mul_overflows(t.elements, dtype_size(t.dtype), bytes))
        throw error(name, "shape " + shape_string(t.shape) + " of " + std::string(to_string(t.dtype)) +
                              " is more than 2^64 bytes");
      if (bytes != t.end - t.begin)
        throw error(name, offs + " hold " + std::to_string(t.end - t.begin) + " bytes, but shape " +
                              shape_string(t.shape) + " of " + std::string(to_string(t.dtype)) + " needs " +
                              std::to_string(bytes));
      tensors_.push_back(std::move(t));
    }

    // The data section must be tiled exactly: no two tensors share a byte, no byte is unowned
    // (the format forbids holes, so a file cannot hide a second payload).
    std::vector<const TensorInfo*> order;
    for (const auto& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    std::uint64_t cursor = 0;
    const TensorInfo* last = nullptr;
    for (const TensorInfo* t : order) {
      if (t->begin < cursor)
        throw error(t->name, "data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) +
                                 "] overlap tensor '" + last->name + "' [" + std::to_string(last->begin) + ", " +
                                 std::to_string(last->end) + "]");
      if (t->begin > cursor)
        throw error({}, "bytes [" + std::to_string(cursor) + ", " + std::to_string(t->begin) +
                            ") of the data section belong to no tensor (holes are not allowed)");
      cursor = t->end;
      last = t;
    }
    if (cursor != data_size_)
      throw error({}, "bytes [" + std::to_string(cursor) + ", " + std::to_string(data_size_) +
                          ") at the end of the data section belong to no tensor");
  } catch (...) {
    release();
    throw;
  }
}

SafeTensors::SafeTensors(SafeTensors&& o) noexcept
    : file_(std::move(o.file_)),
      map_(std::exchange(o.map_, nullptr)),
      map_size_(std::exchange(o.map_size_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      data_size_(std::exchange(o.data_size_, 0)),
      tensors_(std::move(o.tensors_)),
      metadata_(std::move(o.metadata_)) {}

SafeTensors& SafeTensors::operator=(SafeTensors&& o) noexcept {
  if (this != &o) {
    release();
    file_ = std::move(o.file_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_ = std::exchange(o.data_, nullptr);
    data_size_ = std::exchange(o.data_size_, 0);
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

SafeTensors::~SafeTensors() { release(); }

void SafeTensors::release() noexcept {
  if (map_) ::munmap(const_cast<std::byte*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
  data_size_ = 0;
}

const TensorInfo* SafeTensors::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return std::string_view(t.name) < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& SafeTensors::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) throw error(name, "missing");
  return *t;
}

std::span<const std::byte> SafeTensors::raw(std::string_view name) const {
  const TensorInfo& t = at(name);
  return {data_ + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

std::vector<float> SafeTensors::read_f32(std::string_view name, const std::optional<ShapeSpec>& expected,
                                         NonFinite non_finite) const {
  const TensorInfo& t = at(name);
  if (expected && expected->dims != t.shape) {
    std::string m = "shape " + shape_string(t.shape) + ", expected ";
    if (!expected->formula.empty()) m += expected->formula + " = ";
    throw error(name, m + shape_string(expected->dims));
  }
  if (!readable_as_f32(t.dtype))
    throw error(name, "dtype " + std::string(to_string(t.dtype)) +
                          " cannot be read as f32 (F32, F16, BF16 and F64 can)");
  const auto n = static_cast<std::size_t>(t.elements);
  std::vector<float> out(n);
  const std::byte* p = data_ + t.begin;
  switch (t.dtype) {
    case DType::F32:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(load_u32_le(p + 4 * i));
      break;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16_le(p + 2 * i));
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16_le(p + 2 * i));
      break;
    case DType::F64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::bit_cast<double>(load_u64_le(p + 8 * i)));
      break;
    default:
      break;
  }
  if (non_finite == NonFinite::reject)
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(out[i])) {
        std::string what = std::isnan(out[i]) ? "NaN" : (out[i] > 0 ? "inf" : "-inf");
        if (t.dtype == DType::F64) what += " as f32";
        throw error(name, "element " + index_string(i, t.shape) + " is " + what + " (weights must be finite)");
      }
  return out;
}

// ---- attention weights -------------------------------------------------------------------------

namespace {

/// One tensor a layout wants: full name, expected shape, whether it must be there.
struct Want {
  std::string name;
  ShapeSpec shape;
  bool required = true;
};

/// Checks presence, shape and dtype of every wanted tensor, and that nothing else lives under
/// the prefix — all before any data is converted.
void check_layout(const SafeTensors& st, const std::vector<Want>& wants, const std::string& prefix,
                  std::string_view layout, std::string_view unexpected_hint) {
  // Names first: a misspelt or surplus tensor (a head too many) explains the shape errors it causes.
  std::set<std::string_view> known;
  for (const Want& w : wants) known.insert(w.name);
  for (const TensorInfo& t : st.tensors()) {
    if (t.name.compare(0, prefix.size(), prefix) != 0 || known.count(t.name)) continue;
    const std::string_view local = std::string_view(t.name).substr(prefix.size());
    if (local == "bias_k" || local == "bias_v")
      throw st.error(t.name, "add_bias_kv=True (bias_k, bias_v) is not supported");
    std::string m = "unexpected tensor (not part of the " + std::string(layout) + "; see docs/SAFETENSORS.md)";
    if (!unexpected_hint.empty()) m += "; " + std::string(unexpected_hint);
    throw st.error(t.name, m);
  }
  for (const Want& w : wants) {
    const TensorInfo* t = st.find(w.name);
    if (!t) {
      if (w.required) throw st.error(w.name, "missing (" + std::string(layout) + ")");
      continue;
    }
    if (t->shape != w.shape.dims)
      throw st.error(w.name, "shape " + shape_string(t->shape) + ", expected " + w.shape.formula + " = " +
                                 shape_string(w.shape.dims));
    if (!readable_as_f32(t->dtype))
      throw st.error(w.name, "dtype " + std::string(to_string(t->dtype)) + " cannot be read as f32 (F32, F16, BF16 and F64 can)");
  }
}

std::uint32_t to_dim(const SafeTensors& st, std::string_view tensor, std::string_view what, std::uint64_t v) {
  if (v == 0 || v > 0xffffffffu) throw st.error(tensor, std::string(what) + " = " + std::to_string(v) + " is out of range");
  return static_cast<std::uint32_t>(v);
}

/// The 2-D shape of a tensor used to infer dimensions, or an error naming the formula expected.
std::pair<std::uint64_t, std::uint64_t> dims2(const SafeTensors& st, const std::string& name, std::string_view formula) {
  const TensorInfo& t = st.at(name);
  if (t.shape.size() != 2)
    throw st.error(name, "shape " + shape_string(t.shape) + ", expected " + std::string(formula) + " (2 dims)");
  return {t.shape[0], t.shape[1]};
}

ShapeSpec spec(std::vector<std::uint64_t> dims, std::string formula) { return {std::move(dims), std::move(formula)}; }

/// The nn.MultiheadAttention state_dict layout.
AttentionWeights load_mha(const SafeTensors& st, std::uint32_t heads, std::uint32_t d_model, const std::string& pre) {
  const std::string in_w = pre + "in_proj_weight", in_b = pre + "in_proj_bias", out_w = pre + "out_proj.weight",
                    out_b = pre + "out_proj.bias", q_w = pre + "q_proj_weight", k_w = pre + "k_proj_weight",
                    v_w = pre + "v_proj_weight";
  const bool packed = st.contains(in_w);
  if (d_model == 0) {
    // embed_dim: out_proj.weight is [d_model, d_model] in every variant; when it is absent or not
    // 2-D, the inputs' width, so check_layout reports out_proj by name or by its shape.
    const TensorInfo* o = st.find(out_w);
    const TensorInfo* i = st.find(packed ? in_w : q_w);
    std::uint64_t e = 0;
    if (o && o->shape.size() == 2) e = o->shape[0];
    else if (i && i->shape.size() == 2) e = i->shape[1];
    else if (o) throw st.error(out_w, "shape " + shape_string(o->shape) + ", expected [d_model, d_model] (2 dims)");
    else throw st.error(out_w, "missing (nn.MultiheadAttention layout)");
    d_model = to_dim(st, o ? out_w : i->name, "d_model", e);
  }
  const std::uint64_t e = d_model;
  std::vector<Want> wants;
  if (packed) {
    wants.push_back({in_w, spec({3 * e, e}, "[3*d_model, d_model]")});
  } else {
    // kdim/vdim variant: self-attention projects K and V from the same X, so kdim = vdim = d_model.
    wants.push_back({q_w, spec({e, e}, "[d_model, d_model]")});
    wants.push_back({k_w, spec({e, e}, "[d_model, kdim = d_model]")});
    wants.push_back({v_w, spec({e, e}, "[d_model, vdim = d_model]")});
  }
  wants.push_back({in_b, spec({3 * e}, "[3*d_model]"), false});
  wants.push_back({out_w, spec({e, e}, "[d_model, d_model]")});
  wants.push_back({out_b, spec({e}, "[d_model]"), false});
  check_layout(st, wants, pre, "nn.MultiheadAttention layout", {});
  // Shapes depend on d_model only; the head count is the caller's (a state_dict does not store it).
  if (heads == 0)
    throw st.error({}, "the number of heads is not stored in an nn.MultiheadAttention state_dict: give heads");
  if (d_model % heads != 0)
    throw st.error({}, "heads = " + std::to_string(heads) + " does not divide d_model = " + std::to_string(d_model));

  AttentionWeights w;
  w.d_model = d_model;
  w.heads = heads;
  w.d_k = w.d_v = d_model / heads;
  const std::size_t mm = std::size_t(e) * e;
  if (packed) {
    const auto in = st.read_f32(in_w, wants[0].shape);
    w.w_q.assign(in.begin(), in.begin() + mm);
    w.w_k.assign(in.begin() + mm, in.begin() + 2 * mm);
    w.w_v.assign(in.begin() + 2 * mm, in.end());
  } else {
    w.w_q = st.read_f32(q_w, wants[0].shape);
    w.w_k = st.read_f32(k_w, wants[1].shape);
    w.w_v = st.read_f32(v_w, wants[2].shape);
  }
  if (st.contains(in_b)) {
    const auto b = st.read_f32(in_b);
    w.b_q.assign(b.begin(), b.begin() + e);
    w.b_k.assign(b.begin() + e, b.begin() + 2 * e);
    w.b_v.assign(b.begin() + 2 * e, b.end());
  }
  w.w_o = st.read_f32(out_w);
  if (st.contains(out_b)) w.b_o = st.read_f32(out_b);
  return w;
}

/// Our per-head layout (docs/SAFETENSORS.md).
AttentionWeights load_per_head(const SafeTensors& st, std::uint32_t heads, std::uint32_t d_model,
                               const std::string& pre, bool& has_single) {
  auto head = [&](std::uint32_t h, std::string_view part) {
    return pre + "heads." + std::to_string(h) + "." + std::string(part);
  };
  if (heads == 0)
    while (st.contains(head(heads, "q.weight"))) ++heads;
  const auto [dk0, dm0] = dims2(st, head(0, "q.weight"), "[d_k, d_model]");
  if (d_model == 0) d_model = to_dim(st, head(0, "q.weight"), "d_model", dm0);
  const std::uint32_t d_k = to_dim(st, head(0, "q.weight"), "d_k", dk0);
  const std::uint32_t d_v = to_dim(st, head(0, "v.weight"), "d_v", dims2(st, head(0, "v.weight"), "[d_v, d_model]").first);
  const std::uint64_t e = d_model, dk = d_k, dv = d_v, hh = heads;

  std::vector<Want> wants;
  for (std::uint32_t h = 0; h < heads; ++h) {
    wants.push_back({head(h, "q.weight"), spec({dk, e}, "[d_k, d_model]")});
    wants.push_back({head(h, "q.bias"), spec({dk}, "[d_k]"), false});
    wants.push_back({head(h, "k.weight"), spec({dk, e}, "[d_k, d_model]")});
    wants.push_back({head(h, "k.bias"), spec({dk}, "[d_k]"), false});
    wants.push_back({head(h, "v.weight"), spec({dv, e}, "[d_v, d_model]")});
    wants.push_back({head(h, "v.bias"), spec({dv}, "[d_v]"), false});
  }
  wants.push_back({pre + "out.weight", spec({e, hh * dv}, "[d_model, heads*d_v]"), false});
  wants.push_back({pre + "out.bias", spec({e}, "[d_model]"), false});
  has_single = st.contains(pre + "single.q.weight") || st.contains(pre + "single.k.weight") ||
               st.contains(pre + "single.v.weight");
  for (const char* p : {"q", "k", "v"}) {
    wants.push_back({pre + "single." + p + ".weight", spec({e, e}, "[d_model, d_model]"), has_single});
    wants.push_back({pre + "single." + p + ".bias", spec({e}, "[d_model]"), false});
  }
  const std::string hint = "heads = " + std::to_string(heads) + " reads heads.0 .. heads." + std::to_string(heads - 1);
  check_layout(st, wants, pre, "per-head layout", hint);
  if (st.contains(pre + "out.bias") && !st.contains(pre + "out.weight"))
    throw st.error(pre + "out.bias", "given without out.weight");

  AttentionWeights w;
  w.d_model = d_model;
  w.heads = heads;
  w.d_k = d_k;
  w.d_v = d_v;
  // Stack head blocks; a bias a head lacks is zero, and a vector stays empty if no head has one.
  auto stack = [&](std::string_view part, std::uint64_t rows, std::vector<float>& dst, bool bias) {
    bool any = false;
    for (std::uint32_t h = 0; h < heads; ++h) any = any || st.contains(head(h, part));
    if (!any) return;
    dst.assign(std::size_t(hh * rows * (bias ? 1 : e)), 0.0f);
    for (std::uint32_t h = 0; h < heads; ++h) {
      if (!st.contains(head(h, part))) continue;
      const auto v = st.read_f32(head(h, part));
      std::copy(v.begin(), v.end(), dst.begin() + std::ptrdiff_t(h * v.size()));
    }
  };
  stack("q.weight", dk, w.w_q, false);
  stack("k.weight", dk, w.w_k, false);
  stack("v.weight", dv, w.w_v, false);
  stack("q.bias", dk, w.b_q, true);
  stack("k.bias", dk, w.b_k, true);
  stack("v.bias", dv, w.b_v, true);
  if (st.contains(pre + "out.weight")) w.w_o = st.read_f32(pre + "out.weight");
  if (st.contains(pre + "out.bias")) w.b_o = st.read_f32(pre + "out.bias");
  if (has_single) {
    w.s_w_q = st.read_f32(pre + "single.q.weight");
    w.s_w_k = st.read_f32(pre + "single.k.weight");
    w.s_w_v = st.read_f32(pre + "single.v.weight");
    auto bias = [&](const char* p, std::vector<float>& dst) {
      if (st.contains(pre + "single." + p + ".bias")) dst = st.read_f32(pre + "single." + p + ".bias");
    };
    bias("q", w.s_b_q);
    bias("k", w.s_b_k);
    bias("v", w.s_b_v);
  }
  return w;
}

}  // namespace

AttentionWeights load_attention_safetensors(const std::filesystem::path& file, std::uint32_t heads,
                                            const AttentionLoadOptions& options) {
  const SafeTensors st(file);
  const std::string& pre = options.prefix;
  AttentionWeights w;
  bool has_single = false;
  if (st.contains(pre + "in_proj_weight") || st.contains(pre + "q_proj_weight")) {
    w = load_mha(st, heads, options.d_model, pre);
  } else if (st.contains(pre + "heads.0.q.weight")) {
    w = load_per_head(st, heads, options.d_model, pre, has_single);
  } else {
    std::string names;
    std::size_t listed = 0;
    for (const auto& t : st.tensors()) {
      if (listed == 8) {
        names += ", ...";
        break;
      }
      names += (listed++ ? ", " : "") + t.name;
    }
    throw st.error({}, "no attention weights: expected '" + pre + "in_proj_weight' (nn.MultiheadAttention) or '" + pre +
                           "heads.0.q.weight' (per-head layout); the file has " +
                           (names.empty() ? std::string("no tensors") : names));
  }

  if (!options.baseline.empty()) {
    if (has_single)
      throw st.error({}, "has single.* baseline tensors and a baseline file was given too (" +
                             options.baseline.string() + ")");
    const SafeTensors base(options.baseline);
    if (!base.contains("in_proj_weight") && !base.contains("q_proj_weight"))
      throw base.error({}, "baseline: expected a 1-head nn.MultiheadAttention state_dict (in_proj_weight)");
    AttentionWeights b = load_mha(base, 1, w.d_model, "");
    w.s_w_q = std::move(b.w_q);
    w.s_w_k = std::move(b.w_k);
    w.s_w_v = std::move(b.w_v);
    w.s_b_q = std::move(b.b_q);
    w.s_b_k = std::move(b.b_k);
    w.s_b_v = std::move(b.b_v);
  }
  return w;
}

}  // namespace headsep
