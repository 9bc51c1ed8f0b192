// Reports whose text has no token (issue 52): a model without a BOS token (GPT-2, Qwen2) cannot
// run a zero-length sequence, so such a report is refused by file, line and id (as transformers
// refuses it), alone or next to real texts, for any thread and chunk split, leaving no output; a
// model whose tokenizer adds special tokens measures them and its note names them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/model_dir.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

fs::path decoder(const std::string& name) { return testutil::source_path("tests/model/fixtures/decoder/" + name); }

struct Run {
  testutil::Result r;
  bool wrote_summary = false;
};

// `run -s text` over `lines` (JSONL) with `model`; the summary and rows asked for.
Run run_texts(const fs::path& model, const std::string& lines, const std::string& extra = "") {
  testutil::TempDir tmp;
  std::ofstream(tmp.file("t.jsonl")) << lines;
  Run out;
  out.r = testutil::run_cli("run -s text -p path=" + testutil::shell_quote(tmp.file("t.jsonl")) + " --model " +
                            testutil::shell_quote(model.string()) + " --summary " + testutil::shell_quote(tmp.file("s.json")) +
                            " --per-report " + testutil::shell_quote(tmp.file("rows.jsonl")) + " " + extra);
  out.wrote_summary = fs::exists(tmp.file("s.json")) || fs::exists(tmp.file("rows.jsonl"));
  return out;
}

}  // namespace

TEST_CASE("a text with no token for a model without special tokens is refused by file, line and id", "[model][cli]") {
  const fs::path gpt2 = decoder("gpt2");
  SECTION("the only report, empty") {
    const Run run = run_texts(gpt2, "{\"report_id\":\"a\",\"text\":\"\"}\n", "--quiet --threads 1");
    CHECK(run.r.status == 1);
    CHECK_THAT(run.r.err, Contains("t.jsonl:1: report 'a': the text has no token to measure"));
    CHECK_THAT(run.r.err, !Contains("SIGSEGV"));
    CHECK_FALSE(run.wrote_summary);
  }
  SECTION("an empty report between real ones, any threads and chunk") {
    const std::string lines = "{\"report_id\":\"x\",\"text\":\"stop the line\"}\n{\"report_id\":\"b\",\"text\":\"\"}\n"
                              "{\"report_id\":\"y\",\"text\":\"pressure is back\"}\n";
    for (const char* split : {"--threads 1", "--threads 2 --chunk 1", "--threads 2 --chunk 2"}) {
      INFO(split);
      const Run run = run_texts(gpt2, lines, std::string("--quiet ") + split);
      CHECK(run.r.status == 1);
      CHECK_THAT(run.r.err, Contains("t.jsonl:2: report 'b': the text has no token to measure"));
      CHECK_FALSE(run.wrote_summary);
    }
  }
}

TEST_CASE("an empty text is measured as the model's own special tokens, and the note names them", "[model][cli]") {
  const std::string lines = "{\"report_id\":\"x\",\"text\":\"stop the line\"}\n{\"report_id\":\"e\",\"text\":\"\"}\n";
  const Run llama = run_texts(decoder("llama"), lines, "--threads 2 --chunk 1");
  REQUIRE(llama.r.status == 0);
  CHECK_THAT(llama.r.err, Contains("1 of 2 reports have an empty or whitespace-only text: measured as <s>"));
  const Run bert = run_texts(testutil::model_dir(), lines, "--threads 2");
  REQUIRE(bert.r.status == 0);
  CHECK_THAT(bert.r.err, Contains("measured as [CLS] [SEP]"));
}
