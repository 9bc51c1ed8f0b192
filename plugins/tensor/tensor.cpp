// tensor — reports from token embeddings in a safetensors file, so users (and the peer bench)
// feed their own X to attention schemes.
//
//   x        [B, n, d_model]  B reports of n tokens each, or
//   x        [T, d_model]     with `offsets` [B+1] (I64/I32/U64/U32): report r = rows [off[r], off[r+1])
//   features [T, F] or [B, n, F]  optional numeric columns, named by __metadata__ "features"
//            ("decision_axis,evidence_axis,condition_axis"), else f0..f{F-1}
//   __metadata__ "report_ids": optional report ids, comma-separated (B of them)
//
// x and features may be F32, F16, BF16 or F64 (converted: embeddings to f32, features to f64);
// every value must be finite. Besides the features tensor's columns, any column `x[i]`
// (0 <= i < d_model) reads embedding component i, so a file without a features tensor still
// serves `--axes 'a=x[0];b=x[1]'`. Random access: chunk i is reports [i*max, ...), read with
// pread (not from the mapping the header was checked in: a file truncated during the run would
// end the process with SIGBUS there; pread comes back short and the chunk fails naming the file),
// so chunks fill concurrently.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "headsep/finite.hpp"
#include "headsep/plugin_sdk.hpp"
#include "headsep/safetensors.hpp"

namespace {

using namespace headsep::sdk;
using headsep::any_non_finite;
using headsep::DType;
using headsep::first_non_finite;
using headsep::SafeTensors;
using headsep::TensorInfo;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

std::string shape_of(const TensorInfo& t) { return headsep::shape_string(t.shape); }

std::uint16_t load16(const std::byte* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

/// count elements, `stride` apart, from element `first` of p (dtype t) to f64 at dst: one typed
/// loop per run instead of a dtype switch per element (a feature column is a strided read).
void column_to_f64(DType t, const std::byte* p, std::uint64_t first, std::uint64_t stride, std::size_t count,
                   double* dst) noexcept {
  auto run = [&](auto convert) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = convert(first + i * stride);
  };
  switch (t) {
    case DType::F32: run([p](std::uint64_t k) { float f; std::memcpy(&f, p + 4 * k, 4); return double(f); }); break;
    case DType::F64: run([p](std::uint64_t k) { double d; std::memcpy(&d, p + 8 * k, 8); return d; }); break;
    case DType::F16: run([p](std::uint64_t k) { return double(headsep::f16_to_f32(load16(p + 2 * k))); }); break;
    case DType::BF16:
      run([p](std::uint64_t k) { return double(headsep::bf16_to_f32(load16(p + 2 * k))); });
      break;
    default: std::fill_n(dst, count, std::nan("")); break;
  }
}

bool is_float(DType t) noexcept { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.erase(item.begin());
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.pop_back();
    out.push_back(item);
    i = j + 1;
  }
  return out;
}

class TensorGenerator final : public ScenarioGenerator {
 public:
  explicit TensorGenerator(const Params& p) : st_(open(p.get_string("path"))) {
    const std::string xname = p.get_string("x");
    x_ = st_.at(xname);
    if (!is_float(x_.dtype))
      fail(xname, "dtype " + std::string(headsep::to_string(x_.dtype)) + ", expected F32, F16, BF16 or F64");
    const std::string oname = p.get_string("offsets");
    const TensorInfo* off = oname.empty() ? nullptr : st_.find(oname);

    if (x_.shape.size() == 3) {
      const std::uint64_t b = x_.shape[0], n = x_.shape[1];
      d_model_ = check_width(xname, x_.shape[2]);
      if (n == 0 && b > 0) fail(xname, "shape " + shape_of(x_) + " [B, n, d_model]: reports of 0 tokens");
      reports_ = b;
      tokens_ = b * n;
      uniform_ = n;
      if (off) {  // tolerated when it says the same
        auto o = read_offsets(*off, oname);
        for (std::uint64_t r = 0; r < o.size(); ++r)
          if (o[r] != r * n)
            fail(oname, "does not match x " + shape_of(x_) + " [B, n, d_model] (offsets[" + std::to_string(r) +
                            "] = " + std::to_string(o[r]) + ", expected " + std::to_string(r * n) +
                            "); give x as [T, d_model] for ragged reports");
      }
    } else if (x_.shape.size() == 2) {
      tokens_ = x_.shape[0];
      d_model_ = check_width(xname, x_.shape[1]);
      if (!off)
        fail(oname.empty() ? "offsets" : oname,
             "missing: x is " + shape_of(x_) + " = [T, d_model], so report boundaries come from an integer tensor '" +
                 (oname.empty() ? std::string("offsets") : oname) + "' [B+1] (or give x as [B, n, d_model])");
      offsets_ = read_offsets(*off, oname);
      reports_ = offsets_.size() - 1;
    } else {
      fail(xname, "shape " + shape_of(x_) + ": expected [B, n, d_model] or [T, d_model]");
    }

    // Report ids: the header's __metadata__ "report_ids", comma-separated.
    if (auto it = st_.metadata().find("report_ids"); it != st_.metadata().end()) {
      ids_ = split_list(it->second);
      if (ids_.size() != reports_)
        fail("", "__metadata__ \"report_ids\" lists " + std::to_string(ids_.size()) + " ids for " +
                     std::to_string(reports_) + " reports");
    }
    select_reports(p.get_list("report"));
    bind_features(p.get_string("feature_tensor"), p.get_list("features"));
    fd_ = ::open(st_.file().c_str(), O_RDONLY | O_CLOEXEC);
    std::uint64_t header = 0;
    if (fd_ < 0 || ::pread(fd_, &header, 8, 0) != 8) fail("", std::string("cannot read: ") + std::strerror(errno));
    data_start_ = 8 + header;  // checked by SafeTensors
  }
  ~TensorGenerator() override {
    if (fd_ >= 0) ::close(fd_);
  }
  TensorGenerator(const TensorGenerator&) = delete;
  TensorGenerator& operator=(const TensorGenerator&) = delete;

  SchemaInfo schema() const override {
    SchemaInfo s;
    for (const auto& c : columns_) s.features.push_back(c.name);
    s.random_access = true;
    s.total_reports = selected_.empty() ? reports_ : selected_.size();
    s.d_model = d_model_;
    return s;
  }

  // Concurrent for distinct indices: reads only immutable members and the read-only mapping.
  bool chunk(std::uint64_t index, std::uint64_t max_reports, ChunkWriter& out) override {
    const std::uint64_t total = selected_.empty() ? reports_ : selected_.size();
    if (max_reports == 0 || index >= (total + max_reports - 1) / max_reports) return false;
    const std::uint64_t first = index * max_reports, n = std::min(max_reports, total - first);
    auto off = out.token_offsets(n);
    off[0] = 0;
    for (std::uint64_t r = 0; r < n; ++r) {
      const std::uint64_t g = global(first + r);
      off[r + 1] = off[r] + (end_of(g) - begin_of(g));
    }
    const std::uint64_t n_tokens = off[n];
    const std::size_t d = d_model_;
    const std::size_t esize = headsep::dtype_size(x_.dtype);

    // Embeddings: one copy per run of consecutive reports (the whole chunk without --report).
    float* emb = out.embeddings(n_tokens, d_model_).data();
    for (std::uint64_t r = 0; r < n;) {
      std::uint64_t e = r + 1;
      while (e < n && global(first + e) == global(first + r) + (e - r)) ++e;
      const std::uint64_t t0 = begin_of(global(first + r));
      const std::uint64_t at = t0 * d * esize, count = (off[e] - off[r]) * d;
      if (x_.dtype == DType::F32)  // straight into the chunk: no second copy (4 % of a 256² qkv run)
        read_into(x_, at, count * esize, reinterpret_cast<std::byte*>(emb + off[r] * d));
      else
        headsep::convert_to_f32(x_.dtype, read(x_, at, count * esize), count, emb + off[r] * d);
      r = e;
    }
    if (const std::size_t bad = first_non_finite(emb, n_tokens * d); bad < n_tokens * d)
      not_finite(x_.name, first, off, bad / d, bad % d, double(emb[bad]));

    // Feature columns: a strided read converted to f64, one run of consecutive reports at a time.
    for (std::uint32_t c = 0; c < columns_.size(); ++c) {
      const Column& col = columns_[c];
      double* f = out.feature(c, n_tokens).data();
      const TensorInfo& tensor = col.embedding ? x_ : ftensor_;
      const std::uint64_t stride = col.embedding ? d_model_ : f_width_, esz = headsep::dtype_size(tensor.dtype);
      for (std::uint64_t r = 0; r < n;) {
        std::uint64_t e = r + 1;
        while (e < n && global(first + e) == global(first + r) + (e - r)) ++e;
        const std::uint64_t t0 = begin_of(global(first + r)), rows = off[e] - off[r];
        const std::byte* base = read(tensor, t0 * stride * esz, ((rows - 1) * stride + col.index + 1) * esz);
        column_to_f64(tensor.dtype, base, col.index, stride, rows, f + off[r]);
        r = e;
      }
      if (any_non_finite(f, n_tokens))
        for (std::uint64_t i = 0; i < n_tokens; ++i)
          if (!std::isfinite(f[i]))
            not_finite(col.embedding ? x_.name : ftensor_.name, first, off, i, col.index, f[i], col.name);
    }

    if (!ids_.empty() || !selected_.empty()) {
      std::string id;
      for (std::uint64_t r = 0; r < n; ++r) {
        const std::uint64_t g = global(first + r);
        if (!ids_.empty()) {
          out.report_id(ids_[g]);
        } else {
          id = "#" + std::to_string(g);
          out.report_id(id);
        }
      }
    }
    return true;
  }

 private:
  struct Column {
    std::string name;
    bool embedding = false;  // x[i]: component i of the embeddings, else column i of the features tensor
    std::uint64_t index = 0;
  };

  static SafeTensors open(const std::string& path) {
    if (path.empty()) throw ParamError("parameter 'path' is empty: give the safetensors file (-p tensor.path=FILE)");
    return SafeTensors(path);
  }

  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const { throw st_.error(tensor, what); }

  std::uint32_t check_width(const std::string& name, std::uint64_t d) const {
    if (d == 0 || d > (1u << 20)) fail(name, "shape " + shape_of(x_) + ": d_model " + std::to_string(d) + " is not in 1..1048576");
    return static_cast<std::uint32_t>(d);
  }

  /// The offsets tensor [B+1] as uint64, checked: integers, off[0] = 0, increasing (no empty
  /// report), last = T.
  std::vector<std::uint64_t> read_offsets(const TensorInfo& t, const std::string& name) const {
    if (t.shape.size() != 1 || t.shape[0] == 0)
      fail(name, "shape " + shape_of(t) + ", expected [B+1] (report r = x rows [offsets[r], offsets[r+1]))");
    const std::byte* p = st_.raw(name).data();
    std::vector<std::uint64_t> o(t.shape[0]);
    for (std::size_t i = 0; i < o.size(); ++i) {
      std::int64_t v = 0;
      switch (t.dtype) {
        case DType::I64: std::memcpy(&v, p + 8 * i, 8); break;
        case DType::U64: {
          std::uint64_t u;
          std::memcpy(&u, p + 8 * i, 8);
          v = u > std::uint64_t(INT64_MAX) ? -1 : std::int64_t(u);
          break;
        }
        case DType::I32: {
          std::int32_t w;
          std::memcpy(&w, p + 4 * i, 4);
          v = w;
          break;
        }
        case DType::U32: {
          std::uint32_t w;
          std::memcpy(&w, p + 4 * i, 4);
          v = w;
          break;
        }
        default:
          fail(name, "dtype " + std::string(headsep::to_string(t.dtype)) + ", expected an integer type (I64, I32, U64, U32)");
      }
      if (v < 0) fail(name, "offsets[" + std::to_string(i) + "] = " + std::to_string(v) + " is negative");
      o[i] = static_cast<std::uint64_t>(v);
      if (i == 0 && o[0] != 0) fail(name, "offsets[0] = " + std::to_string(o[0]) + ", expected 0");
      if (i > 0 && o[i] <= o[i - 1])
        fail(name, "offsets[" + std::to_string(i) + "] = " + std::to_string(o[i]) + " after offsets[" +
                       std::to_string(i - 1) + "] = " + std::to_string(o[i - 1]) +
                       (o[i] == o[i - 1] ? ": report " + std::to_string(i - 1) + " has no tokens" : ": offsets must increase"));
    }
    if (o.back() != tokens_)
      fail(name, "offsets[" + std::to_string(o.size() - 1) + "] = " + std::to_string(o.back()) + ", but x " +
                     shape_of(x_) + " has " + std::to_string(tokens_) + " token rows");
    return o;
  }

  void select_reports(const std::vector<std::string>& wanted) {
    if (wanted.empty()) return;
    std::unordered_map<std::string, std::uint64_t> index;
    for (std::uint64_t r = 0; r < reports_; ++r) index.emplace(ids_.empty() ? "#" + std::to_string(r) : ids_[r], r);
    std::vector<std::string> missing;
    for (const auto& w : wanted) {
      auto it = index.find(w);
      if (it == index.end()) missing.push_back(w);
      else selected_.push_back(it->second);
    }
    if (!missing.empty()) {
      std::string m;
      for (std::size_t i = 0; i < missing.size() && i < 5; ++i) m += (i ? ", '" : "'") + missing[i] + "'";
      if (missing.size() > 5) m += ", ...";
      fail("", "report " + m + " not found (" +
                   (ids_.empty() ? std::string("the file names no reports: ids are #0..#") + std::to_string(reports_ ? reports_ - 1 : 0)
                                 : std::string("ids come from __metadata__ \"report_ids\"")) +
                   ")");
    }
    std::sort(selected_.begin(), selected_.end());  // file order, each report once
    selected_.erase(std::unique(selected_.begin(), selected_.end()), selected_.end());
  }

  void bind_features(const std::string& fname, const std::vector<std::string>& wanted) {
    std::vector<std::string> names;
    if (const TensorInfo* f = fname.empty() ? nullptr : st_.find(fname)) {
      ftensor_ = *f;
      if (!is_float(f->dtype))
        fail(fname, "dtype " + std::string(headsep::to_string(f->dtype)) + ", expected F32, F16, BF16 or F64");
      const bool flat = f->shape.size() == 2 && f->shape[0] == tokens_;
      const bool nested = f->shape.size() == 3 && uniform_ && f->shape[0] == reports_ && f->shape[1] == uniform_;
      if (!flat && !nested)
        fail(fname, "shape " + shape_of(*f) + ", expected [T, F] with T = " + std::to_string(tokens_) +
                        " token rows of x " + shape_of(x_) + (uniform_ ? " (or [B, n, F])" : ""));
      f_width_ = f->shape.back();
      if (auto it = st_.metadata().find("features"); it != st_.metadata().end()) {
        names = split_list(it->second);
        if (names.size() != f_width_)
          fail(fname, "__metadata__ \"features\" names " + std::to_string(names.size()) + " columns, the tensor " +
                          shape_of(*f) + " has " + std::to_string(f_width_));
        for (std::size_t i = 0; i < names.size(); ++i) {
          if (names[i].empty()) fail(fname, "__metadata__ \"features\": column " + std::to_string(i) + " has an empty name");
          for (std::size_t j = 0; j < i; ++j)
            if (names[j] == names[i]) fail(fname, "__metadata__ \"features\": column '" + names[i] + "' named twice");
        }
      } else {
        for (std::uint64_t i = 0; i < f_width_; ++i) names.push_back("f" + std::to_string(i));
      }
    }
    if (wanted.empty()) {  // every named column (not the x[i] ones)
      for (std::uint64_t i = 0; i < names.size(); ++i) columns_.push_back({names[i], false, i});
      return;
    }
    for (const auto& w : wanted) {
      if (std::any_of(columns_.begin(), columns_.end(), [&](const Column& c) { return c.name == w; })) continue;
      if (auto it = std::find(names.begin(), names.end(), w); it != names.end()) {
        columns_.push_back({w, false, static_cast<std::uint64_t>(it - names.begin())});
        continue;
      }
      std::uint64_t k = 0;
      if (w.size() > 3 && w.compare(0, 2, "x[") == 0 && w.back() == ']') {
        auto [ptr, ec] = std::from_chars(w.data() + 2, w.data() + w.size() - 1, k);
        if (ec == std::errc() && ptr == w.data() + w.size() - 1 && k < d_model_) {
          columns_.push_back({w, true, k});
          continue;
        }
      }
      std::string have;
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
      fail("", "column '" + w + "' (asked for by --axes or -p features) is not available: " +
                   (names.empty() ? "the file has no '" + (fname.empty() ? std::string("features") : fname) +
                                        "' tensor; add one [T, F] with __metadata__ {\"features\": \"name1,name2,...\"}, or "
                                  : "the features are " + have + "; or ") +
                   "use embedding components x[0]..x[" + std::to_string(d_model_ - 1) + "], e.g. --axes 'a=x[0];b=x[1]'");
    }
  }

  std::uint64_t global(std::uint64_t r) const noexcept { return selected_.empty() ? r : selected_[r]; }
  std::uint64_t begin_of(std::uint64_t g) const noexcept { return uniform_ ? g * uniform_ : offsets_[g]; }
  std::uint64_t end_of(std::uint64_t g) const noexcept { return uniform_ ? (g + 1) * uniform_ : offsets_[g + 1]; }

  [[noreturn]] void not_finite(const std::string& tensor, std::uint64_t first, std::span<const std::uint64_t> off,
                               std::uint64_t token, std::uint64_t col, double v, const std::string& column = {}) const {
    const std::uint64_t r = static_cast<std::uint64_t>(std::upper_bound(off.begin(), off.end(), token) - off.begin()) - 1;
    const std::uint64_t g = global(first + r);
    const std::uint64_t row = begin_of(g) + (token - off[r]);
    fail(tensor, "row " + std::to_string(row) + " (report " + (ids_.empty() ? "#" + std::to_string(g) : "'" + ids_[g] + "'") +
                     ", token " + std::to_string(token - off[r]) + "), " +
                     (column.empty() ? "component " + std::to_string(col) : "column '" + column + "'") + ": " +
                     (std::isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf") + " (values must be finite)");
  }

  /// `bytes` bytes of `t`'s data from byte `at` on, read into this thread's buffer.
  const std::byte* read(const TensorInfo& t, std::uint64_t at, std::uint64_t bytes) const {
    thread_local std::vector<std::byte> buf;
    if (buf.size() < bytes) buf.resize(bytes);
    read_into(t, at, bytes, buf.data());
    return buf.data();
  }

  /// The same bytes into `dst`.
  void read_into(const TensorInfo& t, std::uint64_t at, std::uint64_t bytes, std::byte* dst) const {
    const std::uint64_t from = data_start_ + t.begin + at;
    for (std::uint64_t got = 0; got < bytes;) {
      const ssize_t k = ::pread(fd_, dst + got, bytes - got, static_cast<off_t>(from + got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        fail(t.name, k == 0 ? "the file ended before byte " + std::to_string(from + bytes) +
                                  " (it was truncated during the run: inputs must not change while headsep reads them)"
                            : std::string("read failed: ") + std::strerror(errno));
      got += std::uint64_t(k);
    }
  }

  SafeTensors st_;
  int fd_ = -1;
  std::uint64_t data_start_ = 0;  // file offset of the data section (8 + header length)
  TensorInfo x_, ftensor_;
  std::uint32_t d_model_ = 0;
  std::uint64_t reports_ = 0, tokens_ = 0;
  std::uint64_t uniform_ = 0;             // n when x is [B, n, d_model], else 0 (offsets_ used)
  std::uint64_t f_width_ = 0;             // F
  std::vector<std::uint64_t> offsets_;    // [B+1] for x [T, d_model]
  std::vector<std::uint64_t> selected_;   // --report: global indices in file order; empty = all
  std::vector<std::string> ids_;          // from __metadata__ "report_ids"; empty = none
  std::vector<Column> columns_;
};

constexpr headsep_param_spec kParams[] = {
    {"path", HEADSEP_PARAM_STRING, nullptr, "safetensors file: x [B, n, d_model] or [T, d_model] + offsets, optional features (plugins/tensor/README.md)"},
    {"x", HEADSEP_PARAM_STRING, "x", "name of the embeddings tensor: [B, n, d_model], or [T, d_model] with offsets"},
    {"offsets", HEADSEP_PARAM_STRING, "offsets", "name of the integer tensor [B+1] of report boundaries (x [T, d_model])"},
    {"feature_tensor", HEADSEP_PARAM_STRING, "features",
     "name of the optional feature tensor [T, F]; column names from __metadata__ \"features\""},
    {"features", HEADSEP_PARAM_STRING, "",
     "columns to read (headsep run passes the columns its --axes use): feature names, or x[i] = embedding component i"},
    {"report", HEADSEP_PARAM_STRING, "", "comma-separated report ids to keep (__metadata__ \"report_ids\", else #<index>)"},
};

}  // namespace

HEADSEP_SCENARIO_PLUGIN(TensorGenerator, "tensor", "1.0.0",
                        "Reports from token embeddings in a safetensors file (x [B,n,d] or [T,d] + offsets, optional features)",
                        kParams)
