// Safetensors reading (the attention-weight loader is attention_safetensors.cpp). Why the code
// looks the way it does:
//  - The whole header is checked in the constructor, so nothing after it can meet a size that
//    overflows, an offset past the mapping or two tensors sharing bytes. Sizes are products of
//    attacker-chosen 64-bit integers: every multiplication is overflow-checked.
//  - The data section starts at byte 8 + N for any N, so tensors are not aligned: elements are
//    assembled from bytes (little-endian by the format), never read through a cast pointer.
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

#include "headsep/finite.hpp"
#include "support/json_input.hpp"
#include "support/text_util.hpp"

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
[[maybe_unused]] std::uint32_t load_u32_le(const std::byte* p) {  // big-endian hosts only (convert_to_f32)
  return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
         std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}
std::uint16_t load_u16_le(const std::byte* p) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) | std::to_integer<unsigned>(p[1]) << 8);
}

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

namespace {

// The constructor's steps, in order. Each throws st.error(...); st is the SafeTensors being
// constructed (only its file name is read).

/// The file mapped read-only: the mapping and its size (at least the 8-byte header length).
std::pair<const std::byte*, std::uint64_t> map_file(const SafeTensors& st) {
  const int fd = ::open(st.file().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw st.error({}, std::string("cannot open: ") + std::strerror(errno));
  struct stat stat_buf {};
  if (::fstat(fd, &stat_buf) != 0) {
    const int e = errno;
    ::close(fd);
    throw st.error({}, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(stat_buf.st_mode)) {
    ::close(fd);
    throw st.error({}, "not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(stat_buf.st_size);
  if (size < 8) {
    ::close(fd);
    throw st.error({}, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) throw st.error({}, std::string("cannot map: ") + std::strerror(map_errno));
  return {static_cast<const std::byte*>(p), size};
}

/// N, the header's length: inside the file, not absurd, and the header starts as a JSON object.
std::uint64_t header_length(const SafeTensors& st, const std::byte* map, std::uint64_t size) {
  const std::uint64_t n = load_u64_le(map);
  if (n > size - 8)
    throw st.error({}, "header length " + std::to_string(n) + " runs past the end of the file (" +
                           std::to_string(size) + " bytes)");
  if (n > kSafeTensorsMaxHeader)
    throw st.error({}, "header length " + std::to_string(n) + " is absurd (more than " +
                           std::to_string(kSafeTensorsMaxHeader) + " bytes)");
  if (n < 2 || std::to_integer<char>(map[8]) != '{')
    throw st.error({}, "header is not a JSON object (it must start with '{')");
  return n;
}

/// The header's n bytes parsed: a JSON object with no top-level key twice.
json parse_header(const SafeTensors& st, const std::byte* bytes, std::uint64_t n) {
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
  JsonProblem problem;
  auto parsed = try_parse_json(std::string_view(reinterpret_cast<const char*>(bytes), n), problem, cb);
  if (!parsed)
    throw st.error({}, problem.column ? "JSON header, line " + std::to_string(problem.line) + ", column " +
                                           std::to_string(problem.column) + ": " + problem.message()
                                     : "JSON header: " + problem.message());
  json header = std::move(*parsed);
  if (!header.is_object()) throw st.error({}, "header is not a JSON object");
  if (!duplicate.empty()) throw st.error(duplicate, "appears twice in the header");
  return header;
}

/// __metadata__: a JSON object of strings.
void read_metadata(const SafeTensors& st, const json& v, std::map<std::string, std::string>& metadata) {
  if (!v.is_object()) throw st.error({}, "__metadata__ is not a JSON object");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m->is_string()) throw st.error({}, "__metadata__ entry '" + m.key() + "' is not a string");
    metadata.emplace(m.key(), m->get<std::string>());
  }
}

/// One tensor's entry: only dtype, shape and data_offsets; a known dtype; a shape of at most 2^64
/// elements; offsets inside the data section holding exactly dtype x shape bytes.
TensorInfo check_entry(const SafeTensors& st, const std::string& name, const json& v, std::uint64_t data_size) {
  if (!v.is_object()) throw st.error(name, "entry is not a JSON object");
  for (auto k = v.begin(); k != v.end(); ++k)
    if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
      throw st.error(name, "unexpected key '" + k.key() + "' (an entry has dtype, shape and data_offsets)");
  TensorInfo t;
  t.name = name;

  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) throw st.error(name, "no dtype string");
  const auto type = parse_dtype(dt->get_ref<const std::string&>());
  if (!type) throw st.error(name, "unknown dtype '" + dt->get<std::string>() + "'");
  t.dtype = *type;

  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) throw st.error(name, "no shape array");
  for (const json& d : *sh) {
    if (!d.is_number_unsigned())
      throw st.error(name, "shape " + sh->dump() + " has a dimension that is not a non-negative integer");
    t.shape.push_back(d.get<std::uint64_t>());
    if (mul_overflows(t.elements, t.shape.back(), t.elements))
      throw st.error(name, "shape " + sh->dump() + " has more than 2^64 elements");
  }

  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    throw st.error(name, "data_offsets is not [begin, end] with non-negative integers");
  t.begin = (*off)[0].get<std::uint64_t>();
  t.end = (*off)[1].get<std::uint64_t>();
  const std::string offs = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.begin > t.end) throw st.error(name, offs + ": begin after end");
  if (t.end > data_size)
    throw st.error(name, offs + " outside the data section (" + std::to_string(data_size) + " bytes)");
  std::uint64_t bytes = 0;
  if (mul_overflows(t.elements, dtype_size(t.dtype), bytes))
    throw st.error(name, "shape " + shape_string(t.shape) + " of " + std::string(to_string(t.dtype)) +
                             " is more than 2^64 bytes");
  if (bytes != t.end - t.begin)
    throw st.error(name, offs + " hold " + std::to_string(t.end - t.begin) + " bytes, but shape " +
                             shape_string(t.shape) + " of " + std::string(to_string(t.dtype)) + " needs " +
                             std::to_string(bytes));
  return t;
}

/// The data section must be tiled exactly: no two tensors share a byte, no byte is unowned
/// (the format forbids holes, so a file cannot hide a second payload).
void check_tiling(const SafeTensors& st, const std::vector<TensorInfo>& tensors, std::uint64_t data_size) {
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t cursor = 0;
  const TensorInfo* last = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin < cursor)
      throw st.error(t->name, "data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) +
                                  "] overlap tensor '" + last->name + "' [" + std::to_string(last->begin) + ", " +
                                  std::to_string(last->end) + "]");
    if (t->begin > cursor)
      throw st.error({}, "bytes [" + std::to_string(cursor) + ", " + std::to_string(t->begin) +
                             ") of the data section belong to no tensor (holes are not allowed)");
    cursor = t->end;
    last = t;
  }
  if (cursor != data_size)
    throw st.error({}, "bytes [" + std::to_string(cursor) + ", " + std::to_string(data_size) +
                           ") at the end of the data section belong to no tensor");
}

}  // namespace

SafeTensors::SafeTensors(const std::filesystem::path& file) : file_(file.string()) {
  const auto [map, size] = map_file(*this);
  map_ = map;
  map_size_ = size;
  try {
    const std::uint64_t n = header_length(*this, map_, size);
    data_ = map_ + 8 + n;
    data_size_ = size - 8 - n;
    const json header = parse_header(*this, map_ + 8, n);
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") read_metadata(*this, it.value(), metadata_);
      else tensors_.push_back(check_entry(*this, it.key(), it.value(), data_size_));
    }
    check_tiling(*this, tensors_, data_size_);
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

void SafeTensors::drop_pages(std::string_view name, std::uint64_t from, std::uint64_t to) const noexcept {
  const TensorInfo* t = find(name);
  if (!t || from >= to || from >= t->end - t->begin) return;
  const std::uint64_t b = t->begin + from, e = to < t->end - t->begin ? t->begin + to : t->end;
  // Whole pages only: madvise wants a page-aligned start; a page shared with a neighbour is dropped
  // too (it faults back in if the neighbour is read later).
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(data_ + b) / page * page;
  const auto last = reinterpret_cast<std::uintptr_t>(data_ + e);
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
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
  convert_to_f32(t.dtype, data_ + t.begin, n, out.data());
  if (const std::size_t i = non_finite == NonFinite::reject ? first_non_finite(out.data(), n) : n; i < n) {
    std::string what = std::isnan(out[i]) ? "NaN" : (out[i] > 0 ? "inf" : "-inf");
    if (t.dtype == DType::F64) what += " as f32";
    throw error(name, "element " + index_string(i, t.shape) + " is " + what + " (weights must be finite)");
  }
  return out;
}

float f16_to_f32(std::uint16_t h) noexcept {
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

float bf16_to_f32(std::uint16_t b) noexcept { return std::bit_cast<float>(std::uint32_t(b) << 16); }

void convert_to_f32(DType t, const std::byte* p, std::size_t n, float* out) noexcept {
  switch (t) {
    case DType::F32:
      if constexpr (std::endian::native == std::endian::little) {
        if (n) std::memcpy(out, p, n * 4);  // the bulk case (an empty tensor's out may be null)
      } else {
        for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(load_u32_le(p + 4 * i));
      }
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
}

}  // namespace headsep
