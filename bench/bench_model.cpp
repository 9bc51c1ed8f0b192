// The real model's parts: WordPiece tokens/s per thread (target >= 1 M/s) on operations-report
// English and on accented / Korean text, and the BERT forward pass (+ every head metric) on the
// issue's shapes, GFLOP/s against the measured fp32 peak. Needs the model:
//   bench_model --model "$(bash scripts/fetch_model.sh)"   (or HEADSEP_MODEL_DIR)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "headsep/attention.hpp"
#include "headsep/bert.hpp"
#include "headsep/kernels.hpp"
#include "headsep/tokenizer.hpp"
#include "headsep/wordpiece.hpp"
#include "kernels/attention_simd.hpp"

namespace {

std::filesystem::path g_model;

std::string headsep_bench_read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

// The tokenizer.json tokenizers (headsep/tokenizer.hpp), one thread, target >= 1 M tokens/s each:
// MiniLM's WordPiece, and the committed fixtures' byte-level BPEs (GPT-2 style; Llama 3 and Qwen2:
// Split + ByteLevel, args 4 and 5) and byte-fallback BPEs (Llama: Prepend + Replace; Metaspace)
// trained on tests/model/fixtures/tok_corpus.txt, on the English ops texts above (arg 1 = 0) and
// on fresh words (arg 1 = 1: random letter strings, every word a miss of the per-thread word
// cache, so the merge loop itself is measured). The
// fixtures' vocabularies are small (~1000): more tokens per byte than GPT-2's or Llama's; MB/s
// is the rate to compare across vocabularies.
void BM_tokenizer_json(benchmark::State& state) {
  const std::filesystem::path fixtures = std::filesystem::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures";
  const std::filesystem::path files[] = {g_model / "tokenizer.json", fixtures / "tok_gpt2/tokenizer.json",
                                         fixtures / "tok_llama/tokenizer.json", fixtures / "tok_metaspace/tokenizer.json",
                                         fixtures / "tok_llama3/tokenizer.json", fixtures / "tok_qwen2/tokenizer.json"};
  const char* labels[] = {"WordPiece (MiniLM)", "byte-level BPE (GPT-2 style)", "byte-fallback BPE (Llama, Prepend+Replace)",
                          "byte-fallback BPE (Metaspace)", "byte-level BPE (llama3: Split)", "byte-level BPE (qwen2: NFC + Split)"};
  const auto tok = headsep::tokenizer_from_json_file(files[state.range(0)], 1u << 20);
  std::vector<std::string> v = texts(false);
  if (state.range(1) == 1) {  // 4096 texts x 40 words: more distinct words than the cache keeps (65 536)
    std::mt19937 rng(11);
    v.resize(4096);
    for (auto& t : v) {
      t.clear();
      for (int w = 0; w < 40; ++w) {
        for (int k = 3 + int(rng() % 8); k > 0; --k) t += char('a' + rng() % 26);
        t += ' ';
      }
    }
  }
  headsep::Encoding e;
  std::size_t tokens = 0, bytes = 0, i = 0;
  for (auto _ : state) {
    const std::string& t = v[i++ % v.size()];
    tok->encode(t, e);
    tokens += e.ids.size();
    bytes += t.size();
  }
  state.counters["tokens/s"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate);
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(labels[state.range(0)]) + (state.range(1) ? ", fresh words" : ", English ops reports"));
}
BENCHMARK(BM_tokenizer_json)->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}});

// Added tokens matched in one pass (runtime/model/added_match.hpp): 20 000 added tokens (arg 1 = 1;
// 0: the file's own few) over one 200 KB text of random words with one added token every ~1 KB,
// through tok_gpt2 (byte-level BPE, arg 0 = 0) and the small WordPiece of tok_variants (arg 0 = 1).
// Before the automaton every token was compared at every position: 13.6 s for this text.
void BM_added_tokens(benchmark::State& state) {
  const std::filesystem::path fixtures = std::filesystem::path(HEADSEP_SOURCE_DIR) / "tests/model/fixtures";
  const bool wordpiece = state.range(0) == 1;
  nlohmann::json j = nlohmann::json::parse(headsep_bench_read(wordpiece ? fixtures / "tok_variants/base_wp.json"
                                                                        : fixtures / "tok_gpt2/tokenizer.json"));
  std::mt19937 rng(5);
  std::vector<std::string> added;
  if (state.range(1) == 1) {
    std::size_t id = 0;
    for (const auto& a : j["added_tokens"]) id = std::max<std::size_t>(id, a["id"].get<std::size_t>() + 1);
    for (const auto& [k, v] : j["model"]["vocab"].items()) id = std::max<std::size_t>(id, v.get<std::size_t>() + 1);
    for (int i = 0; i < 20000; ++i) {
      std::string t = "tok";
      for (int k = 0; k < 6; ++k) t += char('a' + rng() % 26);
      added.push_back(t);
      j["added_tokens"].push_back({{"id", id++}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                                   {"normalized", false}, {"special", true}});
      if (wordpiece) j["model"]["vocab"][t] = id - 1;
    }
  }
  const auto tok = headsep::tokenizer_from_json(j.dump(), "added.json", 1u << 30);
  std::string text;
  while (text.size() < 200000) {
    for (int k = 2 + int(rng() % 8); k > 0; --k) text += char('a' + rng() % 26);
    text += rng() % 150 == 0 && !added.empty() ? " " + added[rng() % added.size()] + " " : " ";
  }
  headsep::Encoding e;
  for (auto _ : state) tok->encode(text, e);
  state.counters["MB/s"] = benchmark::Counter(double(text.size()) * double(state.iterations()) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(wordpiece ? "WordPiece" : "byte-level BPE") + ", " + std::to_string(added.size()) +
                 " added tokens, 200 KB text");
}
BENCHMARK(BM_added_tokens)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);

// The encoder's four products per layer (tokens x K x N: QKV 384x1152, output 384x384, FFN
// 384x1536 and 1536x384 for MiniLM) on 512 tokens (one group of the forward) and 4096 (whose
// activations outgrow L2): the packed-panel kernel the model uses vs OpenBLAS sgemm
// (single-threaded, as it runs inside oneTBB tasks). Which is faster decides the GEMM backend;
// bench/model_peers.py measures the whole forward against torch. Then the decoders' products at
// real dimensions on one 512-token group (issue 51): GPT-2 small (768: QKV 2304, FFN 3072),
// Qwen2-0.5B (896: QKV 1152, gate+up 9728, down from 4864) and Llama-3.2-1B (2048: QKV 3072,
// gate+up 16384, down from 8192), whose widest panels outgrow L2.
void gemm_args(benchmark::internal::Benchmark* b) {
  for (auto kn : {std::pair{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}})
    for (int m : {512, 4096}) b->Args({m, kn.first, kn.second});
  for (auto kn : {std::pair{768, 2304}, {768, 3072}, {3072, 768}, {896, 1152}, {896, 9728}, {4864, 896},
                  {2048, 3072}, {2048, 2048}, {2048, 16384}, {8192, 2048}})
    b->Args({512, kn.first, kn.second});
}

void BM_gemm_panel(benchmark::State& state) {
  const std::size_t M = state.range(0), K = state.range(1), N = state.range(2);
  std::vector<float> x(M * K, 0.5f), w(K * N, 0.25f), bias(N, 0.1f), c(M * N);
  auto packed = headsep::kernels::pack_panels(w.data(), K, N, bias.data());
  const auto level = headsep::default_level();
  for (auto _ : state) {
    headsep::kernels::project_rows(level, x.data(), K, M, K, packed.get(), N, c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(M * K * N), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gemm_panel)->Apply(gemm_args);

void BM_gemm_openblas(benchmark::State& state) {
  const int M = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2));
  std::vector<float> x(std::size_t(M) * K, 0.5f), w(std::size_t(K) * N, 0.25f), c(std::size_t(M) * N);
  openblas_set_num_threads(1);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, x.data(), K, w.data(), N, 0.0f, c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(M) * K * N, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gemm_openblas)->Apply(gemm_args);

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
