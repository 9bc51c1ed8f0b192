// headsep — the scale-out exchange (docs/DISTRIBUTED.md): who computes which chunk, what travels,
// and how rank 0 puts every chunk back in order.
//
// What travels is a chunk's finished results, not partial aggregates: the summary's moments are
// shifted sums added report by report (stats.hpp), so no merge of per-rank moments reproduces a
// single process bit for bit; the metric rows themselves do, through the very same sinks. The
// rows are ~8 bytes per value (a summary-only run sends only the rows the summary reads), far
// less than the computing that made them (docs/DISTRIBUTED.md has the numbers and a cost model).
#include <deque>
#include <map>
#include <set>

#include "comm.hpp"
#include "dist.hpp"
#include "headsep/batch.hpp"

namespace headsep::dist {
namespace {

using namespace detail;

constexpr std::uint64_t kData = 1, kEnd = 2;

// ---- a chunk's results: worker -> rank 0 -------------------------------------------------

std::string encode_result(const BatchResult& res, bool full) {
  const ReportBatch& b = *res.batch;
  Out o;
  o.u64(kData);
  o.u64(res.index);
  o.u64(b.first_report);
  o.u64(b.source_rows);
  o.u64(full);
  o.vec(b.token_offset);
  o.strs(b.report_ids);
  if (full) o.strs(b.token_names);
  o.u64(res.metrics.size());
  for (std::size_t j = 0; j < res.metrics.size(); ++j) {
    const MetricBlock& m = res.metrics[j];
    o.str(*res.scenario_names[j]);
    o.u64(m.heads), o.u64(m.axes), o.u64(m.n), o.u64(m.head_stat_count), o.u64(m.pair_stat_count);
    // The summary reads separation, differences and the attention statistics; contexts and
    // pairwise separations only go to per-report rows.
    if (full) o.vec(m.context), o.vec(m.pairwise);
    o.vec(m.difference), o.vec(m.separation), o.vec(m.head_stats), o.vec(m.pair_stats);
  }
  o.u64(res.dumps.size());
  for (const AttentionDump& d : res.dumps) {
    o.u64(d.heads), o.u64(d.d_model);
    o.vec(d.reports), o.vec(d.queries), o.vec(d.n_queries), o.vec(d.maps_offset), o.vec(d.maps);
    o.vec(d.output_offset), o.vec(d.output);
  }
  return o.take();
}

std::string end_mark() {
  Out o;
  o.u64(kEnd);
  return o.take();
}

// Returns false for an end mark.
bool decode_result(const std::string& msg, int from, std::uint64_t& index, ReportBatch& b, BatchResult& res,
                   std::vector<std::string>& names) {
  In in(msg, from);
  if (in.u64() == kEnd) {
    in.done();
    return false;
  }
  index = in.u64();
  b.clear();
  b.features.clear();
  b.given_weights.clear();
  b.first_report = in.u64();
  b.source_rows = in.u64();
  const bool full = in.u64() != 0;
  in.vec(b.token_offset);
  if (b.token_offset.empty()) throw Error("message from rank " + std::to_string(from) + " is corrupt (no token offsets)");
  in.strs(b.report_ids);
  if (full) in.strs(b.token_names);
  const std::uint64_t slots = in.u64();
  if (slots > 1u << 20) throw Error("message from rank " + std::to_string(from) + " is corrupt (slots)");
  res.metrics.resize(slots);
  names.resize(slots);
  for (std::uint64_t j = 0; j < slots; ++j) {
    MetricBlock& m = res.metrics[j];
    names[j] = in.str();
    m.heads = static_cast<std::uint32_t>(in.u64()), m.axes = static_cast<std::uint32_t>(in.u64());
    m.n = in.u64();
    m.head_stat_count = static_cast<std::uint32_t>(in.u64()), m.pair_stat_count = static_cast<std::uint32_t>(in.u64());
    if (full) in.vec(m.context), in.vec(m.pairwise);
    else m.context.clear(), m.pairwise.clear();
    in.vec(m.difference), in.vec(m.separation), in.vec(m.head_stats), in.vec(m.pair_stats);
    if (m.n != b.n_reports() || m.separation.size() != m.n)
      throw Error("message from rank " + std::to_string(from) + " is corrupt (metric rows)");
  }
  res.dumps.resize(in.u64());
  for (AttentionDump& d : res.dumps) {
    d.heads = static_cast<std::uint32_t>(in.u64()), d.d_model = static_cast<std::uint32_t>(in.u64());
    in.vec(d.reports), in.vec(d.queries), in.vec(d.n_queries), in.vec(d.maps_offset), in.vec(d.maps);
    in.vec(d.output_offset), in.vec(d.output);
  }
  in.done();
  return true;
}

// ---- a chunk read by rank 0 (sequential sources): rank 0 -> worker ------------------------

std::string encode_batch(std::uint64_t index, const ReportBatch& b, const std::vector<std::string>& scenario_names) {
  Out o;
  o.u64(kData);
  o.u64(index);
  o.u64(b.first_report);
  o.u64(b.source_rows);
  o.vec(b.token_offset);
  o.u64(b.features.size());
  for (const auto& f : b.features) o.vec(f);
  o.strs(b.report_ids);
  o.strs(b.token_names);
  o.strs(scenario_names);
  o.u64(b.given_weights.size());
  for (const auto& g : b.given_weights) o.vec(g);
  o.vec(b.embeddings);
  return o.take();
}

// ---- rank 0 --------------------------------------------------------------------------------

class Merger final : public ChunkExchange {
 public:
  Merger(bool full) : ranks_(dist::size()), full_(full) { (void)full_; }
  ~Merger() override {
    // Unwinding from an error: sends still in flight keep their bytes (MPI may read them until
    // the job is stopped).
    for (auto& p : pending_)
      if (!test(*p)) park(std::move(p));
  }
  bool merges() const override { return true; }

  Take take(std::uint64_t index, ReportSource& source, std::size_t chunk, ReportBatch& batch, BatchResult& result,
            std::vector<std::string>& names) override {
    const int owner = static_cast<int>(index % std::uint64_t(ranks_));
    if (source.random_access()) {
      if (owner == 0) return Take::local;
      if (!receive(owner, batch, result, names)) return Take::end;
      if (batch.first_report != index * chunk)
        throw Error("rank " + std::to_string(owner) + " computed chunk " + std::to_string(index) +
                    " with another chunk size (first report " + std::to_string(batch.first_report) + ", expected " +
                    std::to_string(index * chunk) + "): all ranks must run the same command");
      return Take::remote;
    }
    // Sequential: read ahead so every worker has chunks queued while rank 0 waits for one.
    const std::uint64_t window = 2 * std::uint64_t(ranks_);
    while (!eof_ && read_ < index + window) {
      ReportBatch b;
      if (!source.next(b, chunk)) {
        eof_ = true;
        for (int r = 1; r < ranks_; ++r) pending_.push_back(isend(r, kBatch, end_mark()));
        break;
      }
      const int o = static_cast<int>(read_ % std::uint64_t(ranks_));
      if (o == 0) {
        local_.push_back(std::move(b));
      } else {
        std::vector<std::string> n;
        const auto& all = source.schema().scenario_names;
        for (std::uint32_t s : b.scenarios) {
          if (s >= all.size()) throw Error("scenario generator returned scenario index " + std::to_string(s) + " beyond its schema");
          n.push_back(all[s]);
        }
        pending_.push_back(isend(o, kBatch, encode_batch(read_, b, n)));
      }
      ++read_;
      reap();
    }
    if (index >= read_) return Take::end;
    if (owner == 0) {
      batch = std::move(local_.front());
      local_.pop_front();
      return Take::local;
    }
    if (!receive(owner, batch, result, names))
      throw Error("rank " + std::to_string(owner) + " ended before chunk " + std::to_string(index));
    return Take::remote;
  }

  void finish() override {
    // Every worker's end mark (a result here would be a chunk nobody asked for).
    for (int r = 1; r < ranks_; ++r) {
      if (ended_.count(r)) continue;
      ReportBatch b;
      BatchResult res;
      std::vector<std::string> n;
      std::uint64_t index = 0;
      const std::string msg = recv(r, kResult, true);
      if (decode_result(msg, r, index, b, res, n))
        throw Error("rank " + std::to_string(r) + " sent chunk " + std::to_string(index) + " after the end of the input");
    }
    for (auto& p : pending_) wait(*p);
    pending_.clear();
  }

 private:
  bool receive(int owner, ReportBatch& batch, BatchResult& result, std::vector<std::string>& names) {
    std::uint64_t got = 0;
    const std::string msg = recv(owner, kResult, true);
    if (!decode_result(msg, owner, got, batch, result, names)) {
      ended_.insert(owner);
      return false;
    }
    (void)got;  // a sequential worker numbers its chunks itself; random access is checked by first_report
    return true;
  }
  void reap() {
    while (!pending_.empty() && test(*pending_.front())) pending_.pop_front();
  }

  int ranks_;
  bool full_;
  std::uint64_t read_ = 0;
  bool eof_ = false;
  std::deque<ReportBatch> local_;
  std::deque<std::unique_ptr<Pending>> pending_;
  std::set<int> ended_;
};

// ---- ranks 1..K-1 --------------------------------------------------------------------------

class Share final : public ChunkExchange {
 public:
  bool merges() const override { return false; }
  std::uint64_t chunk_index(std::uint64_t n) const override {
    return std::uint64_t(dist::rank()) + n * std::uint64_t(dist::size());
  }
  void finish() override { send(0, kResult, end_mark()); }
};

// Sends each chunk's results to rank 0: encoded on worker threads, sent in order.
class Forward final : public ResultSink {
 public:
  explicit Forward(bool full) : full_(full) {}
  struct Bytes : SinkPartial {
    std::string bytes;
  };
  void prepare(const BatchResult& result, std::unique_ptr<SinkPartial>& partial) const override {
    auto p = std::make_unique<Bytes>();
    p->bytes = encode_result(result, full_);
    partial = std::move(p);
  }
  void consume(const BatchResult&, SinkPartial* partial) override {
    send(0, kResult, std::move(static_cast<Bytes*>(partial)->bytes));
  }

 private:
  bool full_;
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

std::unique_ptr<ChunkExchange> make_merger(const ReportSource&, bool full) { return std::make_unique<Merger>(full); }

void serve(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions opt, bool full) {
  Share share;
  Forward forward(full);
  opt.exchange = &share;
  opt.progress = false;
  if (source.random_access()) {
    run(source, weighting, axes, opt, {&forward});
  } else {
    Received received(source.schema());
    run(received, weighting, axes, opt, {&forward});
  }
}

}  // namespace headsep::dist
