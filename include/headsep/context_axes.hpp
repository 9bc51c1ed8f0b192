// headsep — context axes whose values a model run takes from the model itself (docs/METRICS.md,
// "Context axes"), beside the lexicon's and the token classes' (feature columns, axes.hpp):
//  - semantic axes from pole words (SemAxis, An et al. 2018): u = mean of the plus words' vectors −
//    mean of the minus words', a word's vector the mean of the input embedding rows of the tokens
//    the model's tokenizer gives it mid-sentence; a token's value cos(e_t, u);
//  - direction axes per layer: a token's value at layer l is h_l(t) · u_l, h_l the residual stream
//    entering layer l (transformers' hidden_states[l]), u_l one row of a [layers, hidden] tensor or
//    the same [hidden] vector at every layer.
//
//   ModelAxes ax;
//   add_semantic_axes(read_file("axes.json"), "axes.json", *tokenizer, *model, ax);
//   add_direction_axes("directions.safetensors", *model, ax);
//   options.model_axes = std::move(ax);               // run_model (model_run.hpp)
//
// Every refusal is one Error naming the file and the axis (and word or tensor).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace headsep {

class Architecture;
class TextTokenizer;

/// Axes a model run computes from the model (after the AxisMap's, in this order: semantic, then direction).
struct ModelAxes {
  std::vector<std::string> semantic;   ///< names
  std::vector<std::string> semantic_from;  ///< where each came from (file or "python"), for the run block
  std::vector<float> semantic_values;  ///< [vocab_size][semantic.size()]: cos(e_t, u)
  std::vector<std::string> direction;  ///< names
  std::vector<std::string> direction_from;
  std::vector<float> directions;       ///< [layers][direction.size()][hidden]
  std::size_t size() const noexcept { return semantic.size() + direction.size(); }
  std::vector<std::string> names() const;
};

/// Semantic axes from JSON text {"name": {"plus": [words], "minus": [words]}, ...} (`file` names it
/// in messages). Refused: malformed JSON, an axis that is not an object of two non-empty string
/// lists, a word the tokenizer gives no token or only unknown tokens ([UNK], <unk>), pole vectors
/// that cancel (|u| = 0), a name already taken in `out`.
void add_semantic_axes(std::string_view json_text, const std::string& file, const TextTokenizer& tokenizer,
                       const Architecture& model, ModelAxes& out);

/// A direction as given (a safetensors tensor, or an array from Python): f32 values of `shape`,
/// [hidden] or [layers, hidden].
struct DirectionTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::vector<float> values;
};
/// Direction axes from these tensors (`where` names their file in messages). Refused: a shape that
/// is not [hidden] or [layers, hidden] of this model, a non-finite value, a zero vector at a
/// layer, a name already taken in `out`, no tensor at all.
void add_direction_axes(const std::vector<DirectionTensor>& tensors, const std::string& where,
                        const Architecture& model, ModelAxes& out);
/// The same from a safetensors file (f32, f16, bf16 or f64 tensors, each an axis by its name).
void add_direction_axes(const std::filesystem::path& file, const Architecture& model, ModelAxes& out);

/// The token-class axes (no file; the text generators' feature columns of these names):
/// position = j / (n − 1) (0 for a one-token report), punctuation = 1 when the token's word is
/// punctuation only, word_start = 1 on the first token of each word (docs/METRICS.md).
inline constexpr std::string_view kTokenAxes[] = {"position", "punctuation", "word_start"};

}  // namespace headsep
