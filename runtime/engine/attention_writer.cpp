// --attention: one JSON line per kept (report, scenario) of an attention scheme, with its
// attention maps and multi-head output (make_attention_writer, headsep/output.hpp).
#include <functional>
#include <vector>

#include "engine/formatted_rows.hpp"
#include "headsep/error.hpp"
#include "headsep/finite.hpp"
#include "headsep/output.hpp"
#include "support/text_util.hpp"

namespace headsep {
namespace {

/// --attention: one JSON line per kept (report, scenario) with its maps and multi-head output.
class AttentionMapWriter final : public ResultSink {
 public:
  AttentionMapWriter(OutputFile& out, std::function<bool(const ReportBatch&, std::size_t)> only,
                     const std::vector<std::uint32_t>& kv_head_of)
      : out_(out), only_(std::move(only)), kv_heads_(kv_head_of.size()) {
    if (kv_head_of.empty()) return;
    kv_field_ = ",\"kv_head_of\":[";
    for (std::size_t h = 0; h < kv_head_of.size(); ++h) kv_field_ += (h ? "," : "") + std::to_string(kv_head_of[h]);
    kv_field_ += ']';
  }
  void prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const override {
    auto f = std::make_unique<FormattedRows>();
    format(res, f->bytes);
    partial = std::move(f);
  }
  void consume(const BatchResult& res, SinkPartial* partial) override {
    if (auto* f = dynamic_cast<FormattedRows*>(partial)) return out_.write(f->bytes);
    std::string s;
    format(res, s);
    out_.write(s);
  }

 private:
  static void rows(std::string& s, const float* a, std::size_t nrows, std::size_t width) {
    s += '[';
    for (std::size_t q = 0; q < nrows; ++q) {
      s += q ? ",[" : "[";
      for (std::size_t k = 0; k < width; ++k) {
        if (k) s += ',';
        append_json_number(s, static_cast<double>(a[q * width + k]));
      }
      s += ']';
    }
    s += ']';
  }
  // Maps and outputs are written only when finite (inf and nan are not JSON); the engine's and
  // the model's checks name an overflow first, this is the writer's own guard.
  static void check_finite(const BatchResult& res, std::size_t j, std::size_t i) {
    const AttentionDump& d = res.dumps[j];
    const std::size_t r = d.reports[i], n = res.batch->report_length(r), nq = d.n_queries[i];
    const float* maps = d.maps.data() + d.maps_offset[i];
    const bool maps_bad = any_non_finite(maps, (std::size_t(d.heads) + 1) * nq * n);
    if (!maps_bad && !(d.d_model && any_non_finite(d.output.data() + d.output_offset[i], nq * d.d_model))) return;
    std::string what = "the multi-head output";
    for (std::uint32_t h = 0; maps_bad && h <= d.heads; ++h)
      if (any_non_finite(maps + std::size_t(h) * nq * n, nq * n)) {
        what = (h ? "head" + std::to_string(h) : std::string("the single head")) + "'s attention map";
        break;
      }
    throw Error("--attention: report '" + printable(res.batch->report_id(r), 200) + "', scenario '" +
                printable(*res.scenario_names[j], 200) + "'" +
                (res.layers.empty() ? std::string() : ", layer " + std::to_string(res.layers[j])) + ": " + what +
                " is not finite (the inputs overflowed f32)");
  }
  // The engine's runs: slot by slot, its kept reports in order. A model run (BatchResult::layers):
  // report by report, each kept layer in order, with "layer" and "token_ids".
  void format(const BatchResult& res, std::string& s) const {
    if (res.layers.empty()) {
      for (std::size_t j = 0; j < res.dumps.size(); ++j)
        for (std::size_t i = 0; i < res.dumps[j].reports.size(); ++i) line(res, j, i, s);
      return;
    }
    std::vector<std::size_t> next(res.dumps.size(), 0);  // per layer: its next kept report
    for (std::size_t r = 0; r < res.batch->n_reports(); ++r)
      for (std::size_t j = 0; j < res.dumps.size(); ++j) {
        const auto& kept = res.dumps[j].reports;
        if (next[j] < kept.size() && kept[next[j]] == r) line(res, j, next[j]++, s);
      }
  }
  // Kept report i of slot j as one JSON line.
  void line(const BatchResult& res, std::size_t j, std::size_t i, std::string& s) const {
    const auto& b = *res.batch;
    const AttentionDump& d = res.dumps[j];
    const std::size_t r = d.reports[i], n = b.report_length(r), nq = d.n_queries[i];
    if (only_ && !only_(b, r)) return;
    check_finite(res, j, i);
    s += "{\"report_id\":";
    append_json_string(s, b.report_id(r));
    s += ",\"report_index\":" + std::to_string(b.first_report + r) + ",\"scenario\":";
    append_json_string(s, *res.scenario_names[j]);
    if (!res.layers.empty()) s += ",\"layer\":" + std::to_string(res.layers[j]);
    s += ",\"tokens\":";
    append_json_tokens(s, b, r);
    if (!res.layers.empty()) {
      s += ",\"token_ids\":";
      append_json_token_ids(s, res, r);
    }
    s += ",\"queries\":[";
    for (std::size_t q = 0; q < nq; ++q) s += (q ? "," : "") + std::to_string(d.queries[i] + q);
    s += "],\"single\":";
    const float* maps = d.maps.data() + d.maps_offset[i];
    rows(s, maps, nq, n);
    s += ",\"heads\":[";
    for (std::uint32_t h = 1; h <= d.heads; ++h) {
      if (h > 1) s += ',';
      rows(s, maps + std::size_t(h) * nq * n, nq, n);
    }
    s += ']';
    if (!res.layers.empty() && kv_heads_) {  // a decoder: heads[h-1] reads kv head kv_head_of[h-1]
      if (kv_heads_ != d.heads)
        throw Error("--attention: kv_head_of has " + std::to_string(kv_heads_) + " entries for " +
                    std::to_string(d.heads) + " heads (a bug)");
      s += kv_field_;
    }
    if (d.d_model) {
      s += ",\"output\":";
      rows(s, d.output.data() + d.output_offset[i], nq, d.d_model);
    }
    s += "}\n";
  }
  OutputFile& out_;
  std::function<bool(const ReportBatch&, std::size_t)> only_;
  std::size_t kv_heads_;  ///< kv_head_of's length (0: not a decoder)
  std::string kv_field_;  ///< ,"kv_head_of":[...], the same on every line of a run
};

}  // namespace

std::unique_ptr<ResultSink> make_attention_writer(OutputFile& out,
                                                  std::function<bool(const ReportBatch&, std::size_t)> only,
                                                  std::vector<std::uint32_t> kv_head_of) {
  return std::make_unique<AttentionMapWriter>(out, std::move(only), kv_head_of);
}

}  // namespace headsep
