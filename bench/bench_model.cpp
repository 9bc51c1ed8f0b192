// The real model's parts: WordPiece tokens/s per thread (target >= 1 M/s) on operations-report
// English and on accented / Korean text, and the BERT forward pass (+ every head metric) on the
// issue's shapes, GFLOP/s against the measured fp32 peak. Needs the model:
//   bench_model --model "$(bash scripts/fetch_model.sh)"   (or HEADSEP_MODEL_DIR)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/bert.hpp"
#include "headsep/kernels.hpp"
#include "headsep/wordpiece.hpp"

namespace {

std::filesystem::path g_model;

std::vector<std::string> texts(bool mixed) {
  const char* en[] = {"Stop decision: pressure anomaly on pump P-101, return condition not met.",
                      "Hold decision after the vibration log showed 12.5 mm/s at 03:40 UTC.",
                      "Shutdown order issued; restart approval pending the lock check.",
                      "Temperature rise of 35 degrees in bearing 2, restart when below 80 for 30 minutes.",
                      "The operator stopped line 3 because the discharge pressure exceeded 8.4 bar."};
  const char* mx[] = {"Élève à l'école où l'été dure; ça va très bien, merci.",
                      "압력 이상으로 정지 결정을 내렸다. 복귀 조건: 압력 안정.",
                      "Ärger über Öl und Übermaß: Straße, Maß, Fußgänger",
                      "정지결정 압력이상 복귀조건 Café naïve Zürich"};
  std::vector<std::string> v;
  std::mt19937 rng(7);
  for (int i = 0; i < 512; ++i) {
    std::string t;
    for (int k = 0; k < 4; ++k) t += std::string(mixed ? mx[rng() % 4] : en[rng() % 5]) + " ";
    v.push_back(t);
  }
  return v;
}

void BM_wordpiece(benchmark::State& state) {
  const headsep::WordPiece wp = headsep::WordPiece::from_file(g_model / "vocab.txt");
  const auto v = texts(state.range(0) == 1);
  headsep::Encoding e;
  std::size_t tokens = 0, bytes = 0, i = 0;
  for (auto _ : state) {
    const std::string& t = v[i++ % v.size()];
    wp.encode(t, e);
    tokens += e.ids.size();
    bytes += t.size();
  }
  state.counters["tokens/s"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate);
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(state.range(0) ? "accents+Korean" : "English ops reports");
}
BENCHMARK(BM_wordpiece)->Arg(0)->Arg(1);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      g_model = argv[i + 1];
      for (int k = i; k + 2 < argc + 1; ++k) argv[k] = argv[k + 2];
      argc -= 2;
      break;
    }
  if (g_model.empty()) {
    const char* e = std::getenv("HEADSEP_MODEL_DIR");
    if (!e) {
      std::cerr << "bench_model: --model DIR or HEADSEP_MODEL_DIR (bash scripts/fetch_model.sh prints it)\n";
      return 2;
    }
    g_model = e;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
