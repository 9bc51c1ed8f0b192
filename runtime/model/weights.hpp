// Private: what the architectures share to load a model folder (weights.cpp) — config.json field
// readers naming the file, the folder's safetensors (one file or the index's shards), packing an
// nn.Linear for the panel kernel — and the decoders' common forward (decoder.cpp).
#pragma once
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headsep/architecture.hpp"
#include "headsep/safetensors.hpp"
#include "kernels/packed_linear.hpp"
#include "support/json_input.hpp"  // json_brief: a config value in a message
#include "support/tsan_order.hpp"

namespace headsep::model {

using json = nlohmann::json;

/// config.json's field `key`: a positive integer (at most 2^24); `def` >= 0 when it may be absent.
std::uint32_t json_uint(const json& j, const char* key, const std::string& file, std::int64_t def = -1);
/// A size transformers reads under two names (GPT-2's n_positions and max_position_embeddings):
/// json_uint of whichever is given; both given and different is refused (which one wins depends
/// on the order transformers applies them in, and a run must not guess).
std::uint32_t json_uint_alias(const json& j, const char* key, const char* alias, const std::string& file);
/// A string field, `def` when absent.
std::string json_str(const json& j, const char* key, const std::string& file, const char* def);
/// A positive finite number, `def` when absent or null.
double json_positive(const json& j, const char* key, const std::string& file, double def);
/// true or false, `def` when absent or null; any other value refused by key ("yes" is not true).
bool json_bool(const json& j, const char* key, const std::string& file, bool def);
/// An object field (rope_scaling): nullptr when absent or null; another type refused by key, as
/// transformers refuses `"rope_scaling": "linear"` rather than run with default RoPE.
const json* json_object(const json& j, const char* key, const std::string& file);
/// DIR/config.json as an object, and the folder's name.
json read_config(const std::filesystem::path& dir, std::string& file);
std::string folder_name(const std::filesystem::path& dir);

/// B[i][o] = W[o][i]: nn.Linear's [out][in] as the panel kernel's input-major B, packed with its bias.
std::shared_ptr<const float> pack_linear(const std::vector<float>& w, const std::vector<float>& b, std::size_t out,
                                         std::size_t in);
/// The same held in `type` (kernels/packed_linear.hpp: bf16 rounds to nearest even, exact for
/// weights read from bf16).
kernels::PackedLinear pack_linear(const std::vector<float>& w, const std::vector<float>& b, std::size_t out,
                                  std::size_t in, kernels::WeightType type);

/// A folder's weights: DIR/model.safetensors, or (when it is absent) every shard that
/// DIR/model.safetensors.index.json's weight_map names, each tensor read from the shard the index
/// says. Tensors are converted to f32 (F32, F16, BF16, F64); another dtype (quantized, integer),
/// a missing tensor or a wrong shape throws Error naming the file and tensor.
class FolderWeights {
 public:
  explicit FolderWeights(const std::filesystem::path& dir);
  bool contains(const std::string& name) const;
  /// The tensor as f32 (shape checked). Its pages of the mapping are given back once copied
  /// (SafeTensors::drop_pages): the resident set holds what the model keeps, not the files.
  std::vector<float> read(const std::string& name, std::vector<std::uint64_t> dims, const std::string& formula) const;
  /// The tensor as `as` (BF16 or F16; shape checked, every value finite): a tensor of that dtype's
  /// bits as they are, another read as f32 and rounded to nearest even. Its pages are given back
  /// as read()'s.
  std::vector<std::uint16_t> read_16(const std::string& name, std::vector<std::uint64_t> dims,
                                     const std::string& formula, DType as) const;
  /// The tensor's dtype in its file (Error naming the file when it is missing).
  DType dtype(const std::string& name) const;
  /// Bytes of the data sections of every file (the weights as stored).
  std::uint64_t data_bytes() const noexcept;

 private:
  std::vector<SafeTensors> files_;
  std::map<std::string, std::size_t, std::less<>> where_;  // tensor -> file (sharded folders)
  std::string index_;                                      // the index file, for messages ("" = one file)
  const SafeTensors& file_of(const std::string& name) const;
};

/// How load_model holds a product whose weights are all `common` in the folder (`mixed`: they are
/// not all one dtype): --dtype bf16: bf16; f32: f32; auto: BF16 (F16) weights in bf16 (f16), else f32.
kernels::WeightType hold_type(WeightDType dtype, DType common, bool mixed = false) noexcept;
/// hold_type of the product made of tensors `names` of `w` (full names; not all one dtype: mixed).
kernels::WeightType hold_type(WeightDType dtype, const FolderWeights& w, std::initializer_list<std::string> names);

/// n bf16 (or f16, `type`) values widened to f32 (exact).
void widen_16(kernels::WeightType type, const std::uint16_t* in, std::size_t n, float* out) noexcept;

/// An embedding table [rows][width] held as hold_type says: f32, or the 16-bit values (a bf16
/// folder's bytes as they are, or an f32 table rounded).
struct HeldTable {
  kernels::WeightType type = kernels::WeightType::f32;
  std::size_t width = 0;
  std::vector<float> f32;
  std::vector<std::uint16_t> h16;
  /// Tensor `name` [rows][width] of `w` (shape checked as FolderWeights::read's).
  static HeldTable read(const FolderWeights& w, const std::string& name, std::uint64_t rows, std::uint64_t width,
                        const std::string& formula, WeightDType dtype);
  bool empty() const noexcept { return f32.empty() && h16.empty(); }
  /// Row r in f32: into the table when f32, else widened into `buf` (width floats).
  const float* row(std::size_t r, float* buf) const noexcept {
    if (type == kernels::WeightType::f32) return f32.data() + r * width;
    widen_16(type, h16.data() + r * width, width, buf);
    return buf;
  }
  std::size_t bytes() const noexcept { return f32.size() * sizeof(float) + h16.size() * sizeof(std::uint16_t); }
};

/// The heap's free pages given back to the system (glibc's malloc_trim; elsewhere nothing). A
/// loader's transient f32 matrices, freed between the panels it keeps, stay resident otherwise:
/// glibc's mmap threshold grows past their size once one is freed, so the next ones come from
/// the heap. Called per layer and at the end of a load: a bf16 BERT-base (203 MB of weights) kept
/// 60-70 MB of them, its resident set when loaded 1.40x -> 1.10x the safetensors (load's peak 1.41x -> 1.16x).
void give_back_freed() noexcept;

/// A loaded model's WeightMemory (done() gives back the load's freed memory first): add() each
/// product and every other array held, then done().
class MemoryCount {
 public:
  void add(const kernels::PackedLinear& p);
  void add_bytes(std::uint64_t n) noexcept { m_.held += n; }
  /// `file`: the safetensors bytes; the resident set now is the loaded model's.
  WeightMemory done(std::uint64_t file);

 private:
  WeightMemory m_;
  bool types_[3] = {};  // f32, bf16, f16 (WeightType's order)
};

// ---- the forward passes' shared steps (layers.cpp) ----

/// Architecture::forward's checks of its arguments: the layer outputs, ids in the vocabulary,
/// reports within max_positions. Messages start with shape.model_type ("bert: ...").
void check_forward(const ModelShape& shape, const std::uint32_t* ids, const std::uint64_t* token_offset,
                   std::size_t n_reports, std::uint32_t axes, const std::vector<AttentionOut>& layers,
                   const DirectionAxes* directions = nullptr);

/// Groups of consecutive reports of about 512 tokens (a longer report alone): fn(r0, r1, tokens).
/// A token's results never depend on its group (the panel kernel's rows are independent).
template <class F>
void for_each_group(const std::uint64_t* token_offset, std::size_t n_reports, F&& fn) {
  constexpr std::size_t kGroupTokens = 512;
  for (std::size_t r0 = 0; r0 < n_reports;) {
    std::size_t r1 = r0, tokens = 0;
    while (r1 < n_reports) {
      const std::size_t n = token_offset[r1 + 1] - token_offset[r1];
      if (r1 > r0 && tokens + n > kGroupTokens) break;
      tokens += n;
      ++r1;
    }
    fn(r0, r1, tokens);
    r0 = r1;
  }
}

/// Scratch of the groups a forward runs in parallel: one per thread that ran one.
class GroupPool {
 public:
  tbb::enumerable_thread_specific<ModelScratch> scratch;
};

/// The groups of for_each_group through fn(r0, r1, tokens, scratch): a single group on the
/// caller's scratch; several as oneTBB tasks in an isolated region (a thread waiting there takes
/// no task from outside it, so no other forward re-enters its pool scratch), each on its thread's
/// scratch from `pool`. Results never depend on the group or the thread; with s.clock on, every
/// group's parts are added to it (s.clock stopped at the end).
inline char groups_handoff = 0;  ///< run_groups' ThreadSanitizer hand-off (nothing else reads it)

template <class F>
void run_groups(GroupPool& pool, const std::uint64_t* token_offset, std::size_t n_reports, ModelScratch& s, F&& fn) {
  std::vector<std::array<std::size_t, 3>> groups;
  for_each_group(token_offset, n_reports, [&](std::size_t r0, std::size_t r1, std::size_t tokens) {
    groups.push_back({r0, r1, tokens});
  });
  if (groups.size() == 1) {
    fn(groups[0][0], groups[0][1], groups[0][2], s);
    s.clock.stop();
    return;
  }
  const bool timing = s.clock.on;
  std::mutex m;
  // ThreadSanitizer (support/tsan_order.hpp): libtbb hands the tasks over out of its sight, so the
  // captures are released to the tasks and the tasks' writes back to this thread explicitly. The
  // hand-off is a global: a task reads it before any capture (a capture's address is one).
  char done = 0;
  const auto group = [&](std::size_t i) {
    tsan::acquire(&groups_handoff);
    const tsan::ReleaseOnExit finished{&done};
    ModelScratch& gs = pool.scratch.local();
    gs.clock = ForwardClock(timing);
    fn(groups[i][0], groups[i][1], groups[i][2], gs);
    gs.clock.stop();
    if (!timing) return;
    std::lock_guard lock(m);
    for (std::size_t p = 0; p < std::size_t(ForwardPart::count); ++p) s.clock.seconds[p] += gs.clock.seconds[p];
  };
  tsan::release(&groups_handoff);
  // simple_partitioner: one task per group (a few per call), no adaptive splitting to hand over.
  tbb::this_task_arena::isolate(
      [&] { tbb::parallel_for(std::size_t(0), groups.size(), group, tbb::simple_partitioner()); });
  tsan::acquire(&done);
}

/// The fused kernel's view of a model's projected rows: H heads + the baseline, rows of `ld`
/// floats, `cols` the head table (q_col, k_col, v_col, dk, dv: 5 rows of H+1).
AttentionReport rows_view(std::uint32_t heads, std::size_t ld, const std::vector<std::uint32_t>& cols, MaskKind mask,
                          std::uint32_t axes);

/// The residual stream entering layer `layer`: the group's rows x [T][hidden], from which the
/// direction axes' values come (DirectionAxes; null directions or none: nothing to compute).
struct LayerStream {
  const DirectionAxes* directions = nullptr;
  std::size_t layer = 0;
  const float* x = nullptr;
  std::size_t hidden = 0;
};

/// Per report of [r0, r1) (the group's rows start at token_offset[r0]): the fused kernel on `qkv`
/// into layer output `o`; `ctx` (rows of H·dh, nullptr = none) gets concat_h(O_h), heads 1..H.
/// The last `stream.directions->count` axes take their values from `stream` (DirectionAxes).
void attend_reports(AttentionReport in, const std::uint64_t* token_offset, std::size_t r0, std::size_t r1,
                    const float* qkv, const float* const* axis, const AttentionOut& o, SimdLevel level, std::size_t dh,
                    float* ctx, ModelScratch& s, const LayerStream& stream);

/// The decoders' layer loop, grouping and attention (decoder.cpp). A decoder's projected rows are
/// [Q (H·dh) | K, one copy per query head (H·dh) | V (KV·dh)]: head h reads Q_h, the K of its
/// key/value head and that head's V; the baseline (head 0) all of Q against all of K, width H·dh.
class Decoder : public Architecture {
 public:
  const ModelShape& shape() const noexcept override { return shape_; }
  const std::string& name() const noexcept override { return name_; }
  void forward(const std::uint32_t* ids, const std::uint64_t* token_offset, std::size_t n_reports, std::uint32_t axes,
               const float* const* axis, SimdLevel level, const std::vector<AttentionOut>& layers, float* hidden,
               ModelScratch& scratch, float* all_hidden = nullptr,
               const DirectionAxes* directions = nullptr) const override;
  double flops(const std::uint64_t* token_offset, std::size_t n_reports) const noexcept override;

 protected:
  /// One group of consecutive reports [r0, r1) of T > 0 tokens, x [T][hidden] at the forward's start.
  struct Group {
    const std::uint32_t* ids;
    const std::uint64_t* token_offset;
    std::size_t r0, r1, T;
    std::uint32_t axes;
    const float* const* axis;
    SimdLevel level;
    const DirectionAxes* directions;
  };
  virtual void embed(const Group& g, float* x, ModelScratch& s) const = 0;
  /// Layer l: s.qkv [T][qkv_ld()] from x (RoPE applied), then after attend(): x updated in place.
  virtual void project(const Group& g, std::size_t l, const float* x, ModelScratch& s) const = 0;
  virtual void finish_layer(const Group& g, std::size_t l, float* x, ModelScratch& s) const = 0;
  virtual void final_norm(float* x, std::size_t rows) const = 0;
  /// Products of one token per layer (multiply-adds, the K copies not counted), for flops().
  virtual double layer_macs() const noexcept = 0;

  void set_heads();  ///< cols_ from shape_ (call at the end of load)
  std::size_t qkv_ld() const noexcept { return std::size_t(shape_.heads) * shape_.head_dim * 2 + kv_width(); }
  std::size_t kv_width() const noexcept { return std::size_t(shape_.kv_heads) * shape_.head_dim; }

  ModelShape shape_;
  std::string name_;
  std::uint32_t intermediate_ = 0;

 private:
  void run_group(const Group& g, const std::vector<AttentionOut>& layers, float* hidden, float* all_hidden,
                 std::size_t total, std::uint64_t base, ModelScratch& s) const;
  std::vector<std::uint32_t> cols_;  // the kernel's head table: q_col, k_col, v_col, dk, dv (5 rows of H+1)
};


}  // namespace headsep::model
