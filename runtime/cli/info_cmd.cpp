// headsep info: the build's and this CPU's capabilities (plugin ABI, SIMD levels, MPI, fp32 peak,
// which bf16 products run).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "dist/dist.hpp"
#include "headsep/architecture.hpp"
#include "headsep/attention.hpp"
#include "headsep/kernels.hpp"
#include "headsep/plugin.h"
#include "kernels/packed_linear.hpp"  // bf16_dot_active

namespace headsep::cli {

CLI::App* add_info(CLI::App& app, std::string& model) {
  CLI::App* c = app.add_subcommand("info", "Show build and CPU capabilities, or what a model folder holds");
  c->add_option("--model", model, "A model folder: say which architecture and switches load_model recognised");
  return c;
}

namespace {
/// The folder loaded (every tensor checked) and described: shape, then the loader's own lines.
int model_info(const std::string& dir) {
  const auto m = load_model(dir);
  const ModelShape& c = m->shape();
  std::FILE* out = data_stdout();
  std::fprintf(out, "model:          %s\n", m->name().c_str());
  std::fprintf(out, "model_type:     %s\n", c.model_type.c_str());
  std::fprintf(out, "shape:          %u layers, hidden %u, %u heads (%u key/value) of %u dims, vocabulary %u, %u positions\n",
               c.layers, c.hidden, c.heads, c.kv_heads, c.head_dim, c.vocab_size, c.max_positions);
  std::fprintf(out, "attention:      %s\n", c.causal ? "causal" : "bidirectional");
  const std::string linear = m->weight_memory().linear;  // (--dtype auto: the folder's dtype)
  std::fprintf(out, "products:       %s\n", linear.empty() ? "f32" : linear.c_str());
  for (const std::string& line : m->recognised()) std::fprintf(out, "  %s\n", line.c_str());
  return 0;
}
}  // namespace

int info_cmd(const std::string& model) {
  if (!model.empty()) return model_info(model);
  auto join_levels = [](const std::vector<SimdLevel>& v) {
    std::string s;
    for (auto l : v) s += (s.empty() ? "" : " ") + std::string(to_string(l));
    return s;
  };
  std::fprintf(data_stdout(), "headsep %s\n", "0.1.0");
  std::fprintf(data_stdout(), "plugin abi:     %d.%d\n", HEADSEP_PLUGIN_ABI_MAJOR, HEADSEP_PLUGIN_ABI_MINOR);
  std::fprintf(data_stdout(), "plugin folder:  %s\n", builtin_dir().string().c_str());
  std::fprintf(data_stdout(), "simd compiled:  %s\n", join_levels(compiled_levels()).c_str());
  std::fprintf(data_stdout(), "simd supported: %s\n", join_levels(supported_levels()).c_str());
  std::fprintf(data_stdout(), "simd chosen:    %s\n", std::string(to_string(default_level())).c_str());
  if (dist::compiled())
    std::fprintf(data_stdout(), "mpi:            %s; %d rank%s%s\n", dist::library().c_str(), dist::size(), dist::size() == 1 ? "" : "s",
                dist::active() ? "" : " (not started by an MPI launcher)");
  else
    std::fprintf(data_stdout(), "mpi:            not compiled in (one process)\n");
  std::fprintf(data_stdout(), "fp32 peak:      %.1f GFLOP/s per core (measured: FMA chains at %s)\n", measure_fp32_peak_gflops(),
              std::string(to_string(default_level())).c_str());
  // Which products a bf16 model runs (docs/MODEL.md, "Weight dtype"): they differ in their bits.
  std::fprintf(data_stdout(), "bf16 products:  %s\n",
               default_level() == SimdLevel::avx512 && kernels::bf16_dot_active()
                   ? "vdpbf16ps (AVX512-BF16): activations rounded to bf16, sums in f32"
                   : "bf16 weights widened to f32 (no AVX512-BF16 at the chosen level): the f32 kernel's bits");
  return 0;
}

}  // namespace headsep::cli
