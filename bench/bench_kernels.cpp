// Metric kernels vs the memory roofline, in memory, 1 and 2 threads.
//
// Inputs (2 axes + heads+1 weight rows, uniform report length L) total kWorkingSet bytes, far
// beyond the last-level cache, so every pass streams them from DRAM. Outputs go into a small
// per-thread tile of kTileReports reports that is reused for every sub-range (stride =
// kTileReports): the engine aggregates each chunk's metrics at once, so in production the
// outputs stay in cache too, and the only DRAM traffic is the input read.
//
// Names: kernel/<f32|f64>/<level>/<strategy>/L<len>/H<heads>/threads:<t>
//        roofline/<f32|f64>/L<len>/H<heads>/threads:<t>  (vectorized sum of the same input bytes)
//        mainjob/f64/<level>/<strategy>/batches:<b>  (the main job's kernel call: ragged 3..6-token reports,
//        2 axes, 2 heads, 3 slots with a shared baseline, batches of 8192 reports, 1 thread;
//        batches:1 stays in the last-level cache as in the engine, batches:32 streams from DRAM)
// Counters: items_per_second = reports (groups) per second; bytes_per_second = input bytes read.
#include <benchmark/benchmark.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "headsep/batch.hpp"
#include "headsep/kernels.hpp"
#include "kernels/metrics_simd.hpp"

using namespace headsep;
using headsep::kernels::Strategy;

namespace {

std::size_t working_set() {
  if (const char* mb = std::getenv("HEADSEP_BENCH_MB")) return std::size_t(std::atol(mb)) << 20;
  return std::size_t(384) << 20;
}
constexpr std::size_t kAxes = 2;
constexpr std::size_t kTileReports = 256;  // per-thread output tile (reused); also the task grain
constexpr std::size_t kGrainTiles = 16;    // tiles per TBB task

/// Heap array without value-initialization (first touch happens in parallel, as in use).
template <class T>
struct Buf {
  std::unique_ptr<T[]> p;
  explicit Buf(std::size_t n) : p(new T[n]) {}
  T* data() const { return p.get(); }
};

template <class T>
struct Data {
  std::size_t L = 0, heads = 0, n = 0, tokens = 0;
  std::vector<Buf<T>> rows;  // axes, then weights
  Buf<std::uint64_t> off{1};
  std::vector<const T*> axis, weight;
  std::size_t input_bytes() const { return tokens * rows.size() * sizeof(T); }
};

template <class T>
Data<T>& data_for(std::size_t L, std::size_t heads) {
  // One data set alive at a time (benchmarks are registered grouped by it).
  static std::unique_ptr<Data<T>> d;
  if (d && d->L == L && d->heads == heads) return *d;
  d.reset();
  d = std::make_unique<Data<T>>();
  d->L = L, d->heads = heads;
  const std::size_t nrows = kAxes + heads + 1;
  d->n = working_set() / (nrows * L * sizeof(T)) / kTileReports * kTileReports;
  d->tokens = d->n * L;
  d->off = Buf<std::uint64_t>(d->n + 1);
  for (std::size_t r = 0; r <= d->n; ++r) d->off.data()[r] = r * L;
  for (std::size_t q = 0; q < nrows; ++q) d->rows.emplace_back(d->tokens);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, d->tokens, 1 << 16), [&](auto range) {
    for (std::size_t q = 0; q < nrows; ++q) {
      T* v = d->rows[q].data();
      for (std::size_t t = range.begin(); t < range.end(); ++t) {
        const std::uint32_t h = std::uint32_t(t * 2654435761u + q * 40503u) >> 8;  // cheap hash
        v[t] = q < kAxes ? T(h % 6000) / T(1000) - T(3) : T(h % 1000) / T(1000);
      }
    }
  });
  for (std::size_t q = 0; q < nrows; ++q) (q < kAxes ? d->axis : d->weight).push_back(d->rows[q].data());
  return *d;
}

template <class T>
struct OutTile {
  std::vector<T> context, difference, pairwise, separation;
  OutTile(std::size_t heads) {
    context.resize((heads + 1) * kAxes * kTileReports);
    difference.resize(heads * kAxes * kTileReports);
    pairwise.resize(pair_count(heads) * kTileReports + 1);
    separation.resize(kTileReports);
  }
};

template <class F>
void in_arena(int threads, std::size_t tiles, F&& body) {
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  auto& a = arenas[threads];
  if (!a) a = std::make_unique<tbb::task_arena>(threads);
  a->execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, tiles, kGrainTiles), body, tbb::static_partitioner());
  });
}

template <class T>
void kernel(benchmark::State& st, SimdLevel level, Strategy how, std::size_t L, std::size_t heads, int threads) {
  Data<T>& d = data_for<T>(L, heads);
  tbb::enumerable_thread_specific<OutTile<T>> tiles([&] { return OutTile<T>(heads); });
  for (auto _ : st) {
    in_arena(threads, d.n / kTileReports, [&](const tbb::blocked_range<std::size_t>& range) {
      OutTile<T>& out = tiles.local();
      KernelArgs<T> a;
      a.n_reports = kTileReports;
      a.uniform_length = static_cast<std::uint32_t>(L);
      a.axes = kAxes;
      a.heads = static_cast<std::uint32_t>(heads);
      a.axis = d.axis.data();
      a.weight = d.weight.data();
      a.context = out.context.data();
      a.difference = out.difference.data();
      a.pairwise = out.pairwise.data();
      a.separation = out.separation.data();
      a.stride = kTileReports;
      for (std::size_t i = range.begin(); i < range.end(); ++i) {
        a.token_offset = d.off.data() + i * kTileReports;
        kernels::compute_metrics(a, level, how);
      }
      benchmark::DoNotOptimize(out.separation.data());
    });
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(d.n));
  st.SetBytesProcessed(std::int64_t(st.iterations()) * std::int64_t(d.input_bytes()));
}

/// Streaming-read roofline: a vectorized sum of every input array, same ranges as the kernel.
template <class T>
void roofline(benchmark::State& st, std::size_t L, std::size_t heads, int threads) {
  using B = xsimd::batch<T, xsimd::sse2>;  // baseline ISA: a DRAM stream does not need wider loads
  Data<T>& d = data_for<T>(L, heads);
  for (auto _ : st) {
    in_arena(threads, d.n / kTileReports, [&](const tbb::blocked_range<std::size_t>& range) {
      const std::size_t b = range.begin() * kTileReports * L, e = range.end() * kTileReports * L;
      B s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
      for (auto& row : d.rows) {
        const T* v = row.data();
        std::size_t t = b;
        for (; t + 4 * B::size <= e; t += 4 * B::size) {
          s0 += B::load_unaligned(v + t);
          s1 += B::load_unaligned(v + t + B::size);
          s2 += B::load_unaligned(v + t + 2 * B::size);
          s3 += B::load_unaligned(v + t + 3 * B::size);
        }
        T tail = T(0);
        for (; t < e; ++t) tail += v[t];
        s0 += B(tail);
      }
      T sum = xsimd::hadd((s0 + s1) + (s2 + s3));
      benchmark::DoNotOptimize(sum);
    });
  }
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(d.n));
  st.SetBytesProcessed(std::int64_t(st.iterations()) * std::int64_t(d.input_bytes()));
}


/// The main job's batches (ops-reports x axis-focus, the seed's 3 designs): per batch the token
/// offsets, 2 axis rows and 3 slots x 3 weight rows (slots 1, 2 share slot 0's baseline), and
/// the outputs of the 3 slots (MetricBlock layout, stride = reports).
struct MainJobBatch {
  static constexpr std::size_t kReports = 8192, kHeads = 2, kSlots = 3;
  std::vector<std::uint64_t> off;
  std::vector<std::vector<double>> rows;  // axes, then slot-major weights
  std::vector<const double*> axis, weight;
  std::vector<std::vector<double>> out;  // per slot: context, difference, pairwise, separation
  std::vector<SlotOut<double>> more;
  KernelArgs<double> args;
  bool nonfinite = false;

  explicit MainJobBatch(std::uint64_t seed) {
    off.push_back(0);
    for (std::size_t r = 0; r < kReports; ++r) {
      const std::uint64_t h = (seed * kReports + r + 1) * 0x9E3779B97F4A7C15ULL;
      off.push_back(off.back() + 3 + ((h >> 32) * 4 >> 32));  // 3..6 tokens, as ops-reports
    }
    const std::size_t tokens = off.back();
    for (std::size_t q = 0; q < kAxes + kSlots * (kHeads + 1); ++q) {
      rows.emplace_back(tokens);
      for (std::size_t t = 0; t < tokens; ++t) {
        const std::uint32_t h = std::uint32_t((t + seed * 977) * 2654435761u + q * 40503u) >> 8;
        rows.back()[t] = q < kAxes ? double(h % 6000) / 1000 - 3 : double(h % 1000) / 1000;
      }
      (q < kAxes ? axis : weight).push_back(rows.back().data());
    }
    const std::size_t per = (kHeads + 1) * kAxes + kHeads * kAxes + pair_count(kHeads) + 1;
    for (std::size_t s = 0; s < kSlots; ++s) out.emplace_back(per * kReports);
    auto slot = [&](std::size_t s) {
      double* o = out[s].data();
      const std::size_t n = kReports;
      return SlotOut<double>{o, o + (kHeads + 1) * kAxes * n, o + (2 * kHeads + 1) * kAxes * n,
                             o + ((2 * kHeads + 1) * kAxes + pair_count(kHeads)) * n};
    };
    for (std::size_t s = 1; s < kSlots; ++s) more.push_back(slot(s));
    const SlotOut<double> s0 = slot(0);
    args.n_reports = kReports;
    args.token_offset = off.data();
    args.axes = kAxes;
    args.heads = kHeads;
    args.axis = axis.data();
    args.weight = weight.data();
    args.context = s0.context, args.difference = s0.difference, args.pairwise = s0.pairwise;
    args.separation = s0.separation;
    args.stride = kReports;
    args.slots = kSlots;
    args.more = more.data();
    args.shared_baseline = true;
    args.nonfinite = &nonfinite;
  }
};

void mainjob(benchmark::State& st, SimdLevel level, Strategy how, std::size_t batches) {
  static std::vector<std::unique_ptr<MainJobBatch>> data;
  while (data.size() < batches) data.push_back(std::make_unique<MainJobBatch>(data.size()));
  for (auto _ : st)
    for (std::size_t b = 0; b < batches; ++b) {
      kernels::compute_metrics(data[b]->args, level, how);
      benchmark::DoNotOptimize(data[b]->out[0].data());
    }
  const auto groups = std::int64_t(batches * MainJobBatch::kReports * MainJobBatch::kSlots);
  st.SetItemsProcessed(std::int64_t(st.iterations()) * groups);  // (report, scenario) groups
}

void register_mainjob() {
  // auto: what the engine runs (contiguous pair loads at avx2/avx512); gather: the hardware
  // gathers it used before, for comparison.
  for (std::size_t batches : {1, 32})
    for (auto level : supported_levels())
      for (auto how : {Strategy::automatic, Strategy::gather}) {
        if (how == Strategy::gather && level < SimdLevel::avx2) continue;
        benchmark::RegisterBenchmark(("mainjob/f64/" + std::string(to_string(level)) + "/" + kernels::to_string(how) +
                                      "/batches:" + std::to_string(batches))
                                         .c_str(),
                                     [=](benchmark::State& st) { mainjob(st, level, how, batches); })
            ->Unit(benchmark::kMicrosecond);
      }
}

template <class T>
void register_all(const char* prec) {
  const auto levels = supported_levels();
  for (std::size_t L : {3, 8, 32, 128})
    for (std::size_t heads : {1, 2, 3, 4})
      for (int threads : {1, 2}) {
        auto suffix = "/L" + std::to_string(L) + "/H" + std::to_string(heads) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(("roofline/" + std::string(prec) + suffix).c_str(),
                                     [=](benchmark::State& st) { roofline<T>(st, L, heads, threads); })
            ->UseRealTime()->Unit(benchmark::kMillisecond);
        for (auto level : levels) {
          std::vector<Strategy> hows{Strategy::automatic};
          // Strategy comparison: 2 heads only, to keep the run short.
          if (level != SimdLevel::scalar && heads == 2) {
            hows.push_back(Strategy::transpose);
            hows.push_back(Strategy::gather);
            if (L <= kernels::kShuffleMax) hows.push_back(Strategy::shuffle);
            if (sizeof(T) == 4) hows.push_back(Strategy::tokens);
          }
          for (auto how : hows)
            benchmark::RegisterBenchmark(
                ("kernel/" + std::string(prec) + "/" + std::string(to_string(level)) + "/" + kernels::to_string(how) + suffix).c_str(),
                [=](benchmark::State& st) { kernel<T>(st, level, how, L, heads, threads); })
                ->UseRealTime()->Unit(benchmark::kMillisecond);
        }
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_mainjob();
  register_all<float>("f32");
  register_all<double>("f64");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("working_set_MiB", std::to_string(working_set() >> 20));
  benchmark::AddCustomContext("output_tile_reports", std::to_string(kTileReports));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
