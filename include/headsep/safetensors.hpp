// headsep — reading weights from safetensors files (https://github.com/huggingface/safetensors).
//
//   SafeTensors st("mha.safetensors");                        // mmap + header checks, no data read
//   for (const TensorInfo& t : st.tensors()) ...               // every tensor, sorted by name
//   std::vector<float> w = st.read_f32("out_proj.weight", ShapeSpec{{16, 16}, "[d_model, d_model]"});
//
//   AttentionWeights aw = load_attention_safetensors("mha.safetensors", 2, {.baseline = "single.safetensors"});
//
// Format: 8 bytes little-endian header length N, N bytes of UTF-8 JSON
//   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}
// then the data section; offsets are relative to its first byte. The whole header is checked when
// the file is opened, before any data byte is used, as ggml/llama.cpp check a model against its
// config: sizes against dtype x shape (overflow-checked), offsets inside the data section, no two
// tensors overlapping and no bytes belonging to no tensor (the format forbids holes). Every
// failure is a headsep::Error naming the file and, where there is one, the tensor.
//
// F32, F16, BF16 and F64 tensors are readable as f32 (F16/BF16 exactly, F64 rounded to nearest);
// the others (integers, BOOL, 8-bit floats, C64) are listed but cannot be read as f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/error.hpp"

namespace headsep {

/// Element types of the format (every byte-sized one; sub-byte F4/F6 types are refused).
enum class DType : std::uint8_t { BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32,
                                  I64, U64, F64, C64 };
std::string_view to_string(DType t) noexcept;       ///< the header's spelling, e.g. "BF16"
std::size_t dtype_size(DType t) noexcept;           ///< bytes per element
bool readable_as_f32(DType t) noexcept;             ///< F32, F16, BF16, F64

/// IEEE binary16 and bfloat16 -> binary32, exact for every value (subnormals, NaN payloads kept).
float f16_to_f32(std::uint16_t h) noexcept;
float bf16_to_f32(std::uint16_t b) noexcept;
/// count little-endian elements of type t (readable_as_f32) at src into f32 at dst; F64 rounds to
/// nearest (out-of-range values become inf: callers that refuse non-finite values catch them).
void convert_to_f32(DType t, const std::byte* src, std::size_t count, float* dst) noexcept;

/// One tensor of the header. Offsets are relative to the data section.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::uint64_t> shape;  ///< empty = a scalar (one element)
  std::uint64_t begin = 0, end = 0;  ///< data_offsets
  std::uint64_t elements = 1;        ///< product of shape (checked: no overflow, matches end - begin)
};

/// An expected shape for read_f32: the dims, and how the caller derived them, for the message
/// ("shape [24, 8], expected [3*d_model, d_model] = [24, 16]"). An empty formula omits that part.
struct ShapeSpec {
  std::vector<std::uint64_t> dims;
  std::string formula;
};

/// Renders "[24, 16]".
std::string shape_string(std::span<const std::uint64_t> dims);

/// A safetensors file, memory-mapped read-only. Movable, not copyable; the mapping is released
/// on destruction. All const members may be called from several threads at once. (As with any
/// mmap, truncating the file while it is open is undefined: the reader takes no lock.)
class SafeTensors {
 public:
  /// Maps `file` and checks its whole header. Throws Error ("FILE: ...") on any violation.
  explicit SafeTensors(const std::filesystem::path& file);
  SafeTensors(SafeTensors&& other) noexcept;
  SafeTensors& operator=(SafeTensors&& other) noexcept;
  SafeTensors(const SafeTensors&) = delete;
  SafeTensors& operator=(const SafeTensors&) = delete;
  ~SafeTensors();

  const std::string& file() const noexcept { return file_; }  ///< the path as given, for messages
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }  ///< sorted by name
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  std::uint64_t data_size() const noexcept { return data_size_; }

  const TensorInfo* find(std::string_view name) const noexcept;  ///< nullptr when absent
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  /// Throws Error "FILE: tensor 'NAME': missing" when absent.
  const TensorInfo& at(std::string_view name) const;

  /// The tensor's raw little-endian bytes (any dtype), inside the mapping.
  std::span<const std::byte> raw(std::string_view name) const;

  enum class NonFinite : std::uint8_t { reject, allow };
  /// The tensor converted to f32, row-major. Throws Error naming the tensor when it is missing,
  /// its dtype is not readable as f32, its shape differs from `expected`, or (unless allowed) an
  /// element is inf or NaN — weights must be finite.
  std::vector<float> read_f32(std::string_view name, const std::optional<ShapeSpec>& expected = std::nullopt,
                              NonFinite non_finite = NonFinite::reject) const;

  /// Lets the kernel take back the mapping's pages under tensor `name` (madvise MADV_DONTNEED; the
  /// file is unchanged and a later read maps them again): a loader that has copied a tensor out
  /// calls it so that the resident set holds the copies, not the file as well.
  /// [from, to): only those bytes of the tensor (a loader copying a large tensor in pieces).
  void drop_pages(std::string_view name, std::uint64_t from = 0, std::uint64_t to = UINT64_MAX) const noexcept;
  /// An Error whose message is "FILE: tensor 'NAME': WHAT" (or "FILE: WHAT" for an empty name).
  Error error(std::string_view tensor, std::string_view what) const;

 private:
  void release() noexcept;

  std::string file_;
  const std::byte* map_ = nullptr;
  std::size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // first byte of the data section
  std::uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// Header lengths above this are refused before anything is allocated (as the reference reader).
inline constexpr std::uint64_t kSafeTensorsMaxHeader = 100'000'000;

/// How load_attention_safetensors reads a file. Layouts and names: docs/SAFETENSORS.md.
struct AttentionLoadOptions {  // every member has an initializer: {.baseline = p} is warning-free
  /// A 1-head nn.MultiheadAttention state_dict of the same d_model: the single-head baseline
  /// (AttentionWeights::s_*) for a file in the MHA layout. Empty: s_* are left empty for the caller
  /// to fill (e.g. from seeded_attention_weights), unless the file itself has `single.*` tensors.
  std::filesystem::path baseline = {};
  /// Expected d_model; 0 = take it from the file (out_proj.weight, or heads.0.q.weight).
  std::uint32_t d_model = 0;
  /// Prepended to every tensor name, e.g. "encoder.layers.0.self_attn." for a module inside a model.
  std::string prefix = {};
};

/// Loads attention projections. The layout is detected by tensor names (under `prefix`):
///  - MHA: what torch.nn.MultiheadAttention.state_dict() holds — `in_proj_weight` [3*d_model, d_model]
///    (rows q, k, v; or `q_proj_weight`, `k_proj_weight`, `v_proj_weight` [d_model, d_model]),
///    optional `in_proj_bias` [3*d_model], `out_proj.weight` [d_model, d_model], `out_proj.bias`
///    [d_model]. `heads` must divide d_model; head h is rows [h*d_k, (h+1)*d_k), as PyTorch splits.
///  - per-head: `heads.{h}.q.weight` [d_k, d_model], `heads.{h}.k.weight` [d_k, d_model],
///    `heads.{h}.v.weight` [d_v, d_model], optional `.bias` of each, h = 0..heads-1; optional
///    `out.weight` [d_model, heads*d_v] and `out.bias` [d_model]; optional baseline
///    `single.{q,k,v}.weight` [d_model, d_model] and `.bias` [d_model]. heads = 0 counts the heads.
/// Every tensor under the prefix must belong to the layout (a misspelt name is an error, not
/// silently ignored); every value must be finite. Throws Error naming the file and tensor.
AttentionWeights load_attention_safetensors(const std::filesystem::path& file, std::uint32_t heads,
                                            const AttentionLoadOptions& options = {});

}  // namespace headsep
