// headsep's side of bench/model_peers.py: the forward pass (any architecture, load_model) plus every head metric (every
// layer, every head and pair, contexts on one axis) over a file of token ids, reports of equal
// length in batches, batches in parallel on oneTBB with --threads workers (a batch split when there are fewer batches than threads).
//   model_peer --model DIR --ids FILE --n TOKENS --batch B --threads T [--repeat K] [--hidden OUT]
// FILE: uint32 little-endian ids, reports back to back. Prints one JSON line: seconds (best of
// K runs), tokens/s, GFLOP/s of the forward (flops() of architecture.hpp), the fp32 peak per core.
// --hidden OUT writes the last hidden state of report 0 (n x hidden f32) for the peer to compare.
#include <sys/resource.h>
#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/architecture.hpp"
#include "headsep/kernels.hpp"

using namespace headsep;

int main(int argc, char** argv) {
  std::string model_dir, ids_file, hidden_file;
  std::size_t n = 0, batch = 1, repeat = 3;
  unsigned threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model_dir = v;
    else if (k == "--ids") ids_file = v;
    else if (k == "--n") n = std::stoul(v);
    else if (k == "--batch") batch = std::stoul(v);
    else if (k == "--threads") threads = static_cast<unsigned>(std::stoul(v));
    else if (k == "--repeat") repeat = std::stoul(v);
    else if (k == "--hidden") hidden_file = v;
    else {
      std::cerr << "model_peer: unknown option " << k << "\n";
      return 2;
    }
  }
  if (model_dir.empty() || ids_file.empty() || n == 0 || batch == 0) {
    std::cerr << "usage: model_peer --model DIR --ids FILE --n TOKENS --batch B --threads T [--repeat K] [--hidden OUT]\n";
    return 2;
  }
  try {
    const auto model = load_model(model_dir);
    const Architecture& m = *model;
    std::ifstream in(ids_file, std::ios::binary | std::ios::ate);
    if (!in) throw std::runtime_error(ids_file + ": cannot open");
    const std::size_t bytes = static_cast<std::size_t>(in.tellg());
    std::vector<std::uint32_t> ids(bytes / 4);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
    const std::size_t reports = ids.size() / n, batches = (reports + batch - 1) / batch;
    const ModelShape& c = m.shape();
    const std::size_t L = c.layers, H = c.heads, H1 = H + 1, P = H * (H - 1) / 2;
    std::vector<float> axis(ids.size());
    for (std::size_t t = 0; t < axis.size(); ++t) axis[t] = static_cast<float>(t % 3);
    const SimdLevel level = default_level();
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
    struct Scratch {
      ModelScratch bert;
      std::vector<std::vector<double>> ctx, hs, ps;
      std::vector<AttentionOut> outs;
      std::vector<std::uint64_t> off;
    };
    tbb::enumerable_thread_specific<Scratch> tls;
    double sum = 0;  // every metric is read, so none is optimised away
    // Fewer batches than threads (16 x 1024 is one batch): each batch is split into equal parts,
    // one task each, so every thread has work as torch's intra-op threads do. Grouping changes no
    // bit of the results (Architecture::forward), only the products' row counts.
    const std::size_t parts = std::max<std::size_t>(1, (threads + batches - 1) / batches);
    auto one_run = [&] {
      tbb::parallel_for(std::size_t(0), batches * parts, [&](std::size_t task) {
        Scratch& s = tls.local();
        const std::size_t bi = task / parts, part = task % parts;
        const std::size_t b0 = bi * batch, bn = std::min(batch, reports - b0), step = (bn + parts - 1) / parts;
        const std::size_t r0 = b0 + std::min(bn, part * step), R = std::min(bn, (part + 1) * step) - (r0 - b0);
        if (R == 0) return;
        s.off.resize(R + 1);
        for (std::size_t r = 0; r <= R; ++r) s.off[r] = (r0 + r) * n;
        s.ctx.resize(L), s.hs.resize(L), s.ps.resize(L), s.outs.resize(L);
        for (std::size_t l = 0; l < L; ++l) {
          s.ctx[l].resize(H1 * R), s.hs[l].resize(H1 * kHeadStats * R), s.ps[l].resize(P * kPairStats * R);
          s.outs[l].context = s.ctx[l].data(), s.outs[l].head_stats = s.hs[l].data();
          s.outs[l].pair_stats = s.ps[l].data(), s.outs[l].stride = R;
        }
        const float* ax[1] = {axis.data()};
        m.forward(ids.data(), s.off.data(), R, 1, ax, level, s.outs, nullptr, s.bert);
      });
    };
    // Wall seconds and process CPU seconds (every thread's) of each run, the best of each: on a
    // shared host the CPU seconds say what the work cost when other processes took the cores.
    auto cpu_now = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    double best = 1e300, best_cpu = 1e300;
    for (std::size_t k = 0; k < repeat; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_now();
      one_run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      best_cpu = std::min(best_cpu, cpu_now() - c0);
    }
    for (auto& s : tls)
      for (auto& v : s.hs)
        for (double x : v) sum += x;
    std::vector<std::uint64_t> all_off(reports + 1);
    for (std::size_t r = 0; r <= reports; ++r) all_off[r] = r * n;
    const double gflop = m.flops(all_off.data(), reports) * 1e-9;
    if (!hidden_file.empty()) {
      std::vector<float> hidden(n * c.hidden);
      std::vector<std::vector<double>> ctx(L, std::vector<double>(H1)), hs(L, std::vector<double>(H1 * kHeadStats)),
          ps(L, std::vector<double>(P * kPairStats));
      std::vector<AttentionOut> outs(L);
      for (std::size_t l = 0; l < L; ++l)
        outs[l].context = ctx[l].data(), outs[l].head_stats = hs[l].data(), outs[l].pair_stats = ps[l].data(), outs[l].stride = 1;
      const std::uint64_t off[2] = {0, n};
      const float* ax[1] = {axis.data()};
      ModelScratch s;
      m.forward(ids.data(), off, 1, 1, ax, level, outs, hidden.data(), s);
      std::ofstream(hidden_file, std::ios::binary).write(reinterpret_cast<const char*>(hidden.data()),
                                                         static_cast<std::streamsize>(hidden.size() * sizeof(float)));
    }
    std::printf("{\"seconds\": %.6f, \"cpu_seconds\": %.6f, \"tokens_per_s\": %.1f, \"gflops\": %.2f, \"peak_per_core\": %.1f, \"simd\": \"%s\", \"check\": %.6g}\n",
                best, best_cpu, double(reports * n) / best, gflop / best, measure_fp32_peak_gflops(),
                std::string(to_string(level)).c_str(), sum);
  } catch (const std::exception& e) {
    std::cerr << "model_peer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
