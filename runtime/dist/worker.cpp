// headsep — ranks 1..K-1 of a scale-out run (docs/DISTRIBUTED.md): compute this rank's share of
// the chunks (chunk i when i mod K is this rank; a CSV's chunks come from rank 0, or from this
// rank's byte ranges) and send each chunk's results to rank 0 in order; serve_model() the same
// for `run --model` (run_model's pipeline, every row sent).
#include <map>

#include "dist/comm.hpp"
#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"
#include "dist/messages.hpp"
#include "dist/offset_rows.hpp"
#include "headsep/batch.hpp"

namespace headsep::dist {
namespace {

using namespace detail;

class Share final : public ChunkExchange {
 public:
  explicit Share(OffsetRows* rows = nullptr) : rows_(rows) {}
  bool merges() const override { return false; }
  std::uint64_t chunk_index(std::uint64_t n) const override {
    return std::uint64_t(dist::rank()) + n * std::uint64_t(dist::size());
  }
  void finish() override {
    if (rows_) rows_->pump(true);  // every row written before rank 0 may commit the file
    send(0, kResult, end_mark());
  }

 private:
  OffsetRows* rows_;
};

// Sends each chunk's results to rank 0: encoded on worker threads, sent in order.
// With byte ranges (`csv` set), each message names its block.
class Forward final : public ResultSink {
 public:
  explicit Forward(bool full, RangedCsv* csv = nullptr, OffsetRows* rows = nullptr)
      : full_(full), csv_(csv), rows_(rows) {}
  struct Bytes : SinkPartial {
    std::string bytes;
    std::unique_ptr<SinkPartial> rows;  // offset writes: the writer's formatted rows
  };
  void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const override {
    auto p = std::make_unique<Bytes>();
    p->bytes = encode_result(result, full_);
    if (csv_) p->bytes = wrap_block(csv_->block_of(result.index), std::move(p->bytes));
    if (rows_) rows_->writer().prepare(result, p->rows);
    partial = std::move(p);
  }
  void consume(const BatchResult& result, SinkPartial* partial) override {
    auto* p = static_cast<Bytes*>(partial);
    if (rows_) {
      rows_->writer().consume(result, p->rows.get());
      Out o;
      o.u64(kOffsetData);
      o.u64(rows_->take_rows());
      o.str(p->bytes);
      send(0, kResult, o.take());
      rows_->pump(false);
    } else {
      send(0, kResult, std::move(p->bytes));
    }
    if (csv_) csv_->forget_before(result.index);
  }

 private:
  bool full_;
  RangedCsv* csv_;
  OffsetRows* rows_;
};

// Chunks rank 0 read, as a sequential source with the schema the worker opened.
class Received final : public ReportSource {
 public:
  explicit Received(const Schema& schema) : schema_(schema) {
    for (std::uint32_t i = 0; i < schema_.scenario_names.size(); ++i) ids_.emplace(schema_.scenario_names[i], i);
  }
  const Schema& schema() const override { return schema_; }
  bool next(ReportBatch& b, std::size_t) override {
    const std::string msg = recv(0, kBatch, false);
    In in(msg, 0);
    if (in.u64() == kEnd) return false;
    b.clear();
    (void)in.u64();  // chunk index
    b.first_report = in.u64();
    b.source_rows = in.u64();
    in.vec(b.token_offset);
    if (b.token_offset.empty()) throw Error("message from rank 0 is corrupt (no token offsets)");
    b.features.resize(in.u64());
    for (auto& f : b.features) in.vec(f);
    in.strs(b.report_ids);
    in.strs(b.token_names);
    std::vector<std::string> names;
    in.strs(names);
    b.scenarios.clear();
    for (const auto& n : names) {
      auto [it, added] = ids_.emplace(n, static_cast<std::uint32_t>(schema_.scenario_names.size()));
      if (added) schema_.scenario_names.push_back(n);
      b.scenarios.push_back(it->second);
    }
    b.given_weights.resize(in.u64());
    for (auto& g : b.given_weights) in.vec(g);
    in.vec(b.embeddings);
    in.done();
    return true;
  }

 private:
  Schema schema_;
  std::map<std::string, std::uint32_t> ids_;
};

}  // namespace

void serve_model(ReportSource& source, const Architecture& model, const AxisMap& axes, ModelRunOptions opt) {
  Share share;
  Forward forward(true);  // the model's summary reads contexts and pair distances: every row travels
  opt.exchange = &share;
  opt.sinks = {&forward};
  if (source.random_access()) {
    run_model(source, model, axes, opt);
  } else {
    Received received(source.schema());
    run_model(received, model, axes, opt);
  }
}

void serve(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions opt, bool full) {
  std::unique_ptr<OffsetRows> rows;
  if (offset_rows_on()) rows = std::make_unique<OffsetRows>();
  Share share(rows.get());
  Forward forward(full, nullptr, rows.get());
  opt.exchange = &share;
  opt.progress = false;
  if (auto* csv = dynamic_cast<RangedCsv*>(&source)) {
    Forward ranged(full, csv);
    run(source, weighting, axes, opt, {&ranged});
  } else if (source.random_access()) {
    run(source, weighting, axes, opt, {&forward});
  } else {
    Received received(source.schema());
    run(received, weighting, axes, opt, {&forward});
  }
}

}  // namespace headsep::dist
