// headsep — the scale-out exchange (docs/DISTRIBUTED.md): who computes which chunk, what travels,
// and how rank 0 puts every chunk back in order.
//
// What travels is a chunk's finished results, not partial aggregates: the summary's moments are
// shifted sums added report by report (stats.hpp), so no merge of per-rank moments reproduces a
// single process bit for bit; the metric rows themselves do, through the very same sinks. The
// rows are ~8 bytes per value (a summary-only run sends only the rows the summary reads), far
// less than the computing that made them (docs/DISTRIBUTED.md has the numbers and a cost model).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <map>
#include <set>

#include "dist/comm.hpp"
#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"
#include "headsep/batch.hpp"

namespace headsep::dist {
namespace {

using namespace detail;

constexpr std::uint64_t kData = 1, kEnd = 2, kBlockData = 3, kOffsetData = 4;

// ---- HEADSEP_ROWS=offsets ----------------------------------------------------------------
struct OffsetConfig {
  bool on = false;
  Format format = Format::csv;
  RunInfo info;
};
OffsetConfig& offset_config() {
  static OffsetConfig c;
  return c;
}

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
    for (auto& p : pending_replies_)
      if (!test(*p)) park(std::move(p));
  }
  bool merges() const override { return true; }

  Take take(std::uint64_t index, ReportSource& source, std::size_t chunk, ReportBatch& batch, BatchResult& result,
            std::vector<std::string>& names) override {
    const int owner = static_cast<int>(index % std::uint64_t(ranks_));
    taking_ = index;
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
    for (auto& p : pending_replies_) wait(*p);
    pending_replies_.clear();
  }

 private:
  bool receive(int owner, ReportBatch& batch, BatchResult& result, std::vector<std::string>& names) {
    std::uint64_t got = 0;
    std::string msg = recv(owner, kResult, true);
    std::uint64_t rows_bytes = 0;
    bool offset = false;
    if (msg.size() >= 16 && std::memcmp(msg.data() + 8, &kOffsetData, 8) == 0) {  // rows written by the worker
      In in(msg, owner);
      (void)in.u64();
      rows_bytes = in.u64();
      std::string inner = in.str();
      in.done();
      msg.swap(inner);
      offset = true;
    }
    if (offset) {
      std::lock_guard<std::mutex> lock(mu_);
      remote_rows_[taking_] = {owner, rows_bytes};
    }
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


 public:
  // Offset writes: the owner and row bytes of a chunk another rank formatted (none: rank 0's).
  bool remote_rows(std::uint64_t index, int& owner, std::uint64_t& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = remote_rows_.find(index);
    if (it == remote_rows_.end()) return false;
    owner = it->second.first, bytes = it->second.second;
    return true;
  }
  void forget_rows(std::uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    remote_rows_.erase(index);
  }
  void reply(int owner, std::string bytes) {
    pending_replies_.push_back(isend(owner, kOffset, std::move(bytes)));
    while (!pending_replies_.empty() && test(*pending_replies_.front())) pending_replies_.pop_front();
  }

 private:
  int ranks_;
  bool full_;
  std::uint64_t taking_ = 0;
  std::mutex mu_;
  std::map<std::uint64_t, std::pair<int, std::uint64_t>> remote_rows_;
  std::deque<std::unique_ptr<Pending>> pending_replies_;
  std::uint64_t read_ = 0;
  bool eof_ = false;
  std::deque<ReportBatch> local_;
  std::deque<std::unique_ptr<Pending>> pending_;
  std::set<int> ended_;
};

// ---- the CSV as byte ranges (HEADSEP_CSV_SPLIT=ranges, csv_ranges.cpp) ----------------------
// Block j belongs to rank j mod K; rank 0 merges block after block in file order. A rank's
// messages carry their block; a rank with nothing in a block sends nothing for it, so a message
// of a later block (or the rank's end mark) closes the blocks before it.

// Worker: a chunk's results with its block in front.
std::string wrap_block(std::uint64_t block, std::string inner) {
  Out o;
  o.u64(kBlockData);
  o.u64(block);
  o.str(inner);
  return o.take();
}

class RangeMerger final : public ChunkExchange {
 public:
  explicit RangeMerger(detail::RangedCsv& csv) : csv_(csv), ranks_(dist::size()), peeked_(std::size_t(ranks_)) {}
  bool merges() const override { return true; }

  Take take(std::uint64_t, ReportSource&, std::size_t chunk, ReportBatch& batch, BatchResult& result,
            std::vector<std::string>& names) override {
    for (; block_ < csv_.blocks(); ++block_) {
      const int owner = static_cast<int>(block_ % std::uint64_t(ranks_));
      if (owner == 0) {
        if (!local_ready_) {
          local_more_ = csv_.next(local_, chunk);
          local_block_ = csv_.last_block();
          local_ready_ = true;
          csv_.forget_before(UINT64_MAX);  // block_of() is for the workers' sinks
        }
        if (!local_more_ || local_block_ != block_) continue;
        batch = std::move(local_);
        local_ready_ = false;
        number(batch);
        return Take::local;
      }
      Peeked& p = peeked_[std::size_t(owner)];
      if (!p.ready && !p.ended) {
        const std::string msg = recv(owner, kResult, true);
        In in(msg, owner);
        if (in.u64() == kEnd) {
          in.done();
          p.ended = true;
        } else {
          p.block = in.u64();
          p.inner = in.str();
          in.done();
          if (p.block < block_ || p.block % std::uint64_t(ranks_) != std::uint64_t(owner))
            throw Error("message from rank " + std::to_string(owner) + " is corrupt (block " + std::to_string(p.block) + ")");
          p.ready = true;
        }
      }
      if (p.ended || p.block != block_) continue;
      std::uint64_t index = 0;
      if (!decode_result(p.inner, owner, index, batch, result, names))
        throw Error("message from rank " + std::to_string(owner) + " is corrupt (an end mark inside a block)");
      p.ready = false;
      p.inner.clear();
      number(batch);
      return Take::remote;
    }
    return Take::end;
  }

  void finish() override {
    for (int r = 1; r < ranks_; ++r) {
      Peeked& p = peeked_[std::size_t(r)];
      if (p.ready) throw Error("rank " + std::to_string(r) + " sent block " + std::to_string(p.block) + " after the end of the input");
      if (p.ended) continue;
      const std::string msg = recv(r, kResult, true);
      In in(msg, r);
      if (in.u64() != kEnd) throw Error("rank " + std::to_string(r) + " sent a chunk after the end of the input");
    }
  }

 private:
  struct Peeked {
    bool ready = false, ended = false;
    std::uint64_t block = 0;
    std::string inner;
  };
  // Global report indices, given in file order (each rank numbered its blocks from 0).
  void number(ReportBatch& b) {
    b.first_report = reports_;
    reports_ += b.n_reports();
    csv_.add_rows(b.source_rows);
  }

  detail::RangedCsv& csv_;
  int ranks_;
  std::uint64_t block_ = 0, reports_ = 0;
  ReportBatch local_;
  bool local_ready_ = false, local_more_ = false;
  std::uint64_t local_block_ = 0;
  std::vector<Peeked> peeked_;
};

// ---- ranks 1..K-1 --------------------------------------------------------------------------

// A worker's rows under HEADSEP_ROWS=offsets: formatted by the real writer into memory, sent as a
// length, written at the offset rank 0 replies with (in chunk order), straight into rank 0's file.
class OffsetRows {
 public:
  OffsetRows() : file_(&captured_), writer_(make_writer(offset_config().format, file_, offset_config().info)) {
    captured_.clear();  // a header belongs to rank 0
  }
  ~OffsetRows() {
    if (fd_ >= 0) ::close(fd_);
  }
  ResultWriter& writer() { return *writer_; }
  // Serial, chunk order: the rows just formatted (into captured_) wait for their offset.
  std::uint64_t take_rows() {
    waiting_.push_back(std::move(captured_));
    captured_.clear();
    return waiting_.back().size();
  }
  // Writes the chunks whose offsets arrived; `all`: waits until none is left. At most 8 chunks
  // wait (memory stays bounded when rank 0 is behind). Rank 0 replies when it consumes a chunk,
  // and holds at most in_flight (2 x threads) chunks between taking and consuming them, so with
  // one thread it never needs a 9th chunk from a rank that waits here.
  void pump(bool all) {
    while (!waiting_.empty()) {
      if (!all && waiting_.size() <= 8) {
        int flag = 0;
        MPI_Iprobe(0, kOffset, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (!flag) return;
      }
      const std::string msg = recv(0, kOffset, false);
      In in(msg, 0);
      const std::uint64_t offset = in.u64();
      const std::string path = in.str();
      in.done();
      if (fd_ < 0) {
        fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) throw Error("cannot open rank 0's output " + path + " (offset writes need one host): " + std::strerror(errno));
      }
      const std::string& rows = waiting_.front();
      std::size_t done = 0;
      while (done < rows.size()) {
        const ssize_t n = ::pwrite(fd_, rows.data() + done, rows.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error("writing rows into rank 0's output: " + std::string(std::strerror(errno)));
        done += std::size_t(n);
      }
      waiting_.pop_front();
    }
  }

 private:
  std::string captured_;
  OutputFile file_;
  std::unique_ptr<ResultWriter> writer_;
  std::deque<std::string> waiting_;
  int fd_ = -1;
};

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
  explicit Forward(bool full, detail::RangedCsv* csv = nullptr, OffsetRows* rows = nullptr)
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
  detail::RangedCsv* csv_;
  OffsetRows* rows_;
};

// Rank 0, offset writes: its own chunks through the writer; another rank's chunk is a gap of its
// length, and that rank learns the gap's offset (chunk order: the writer wrote everything before).
class OffsetRowsSink final : public ResultSink {
 public:
  OffsetRowsSink(Merger& m, ResultWriter& w, OutputFile& out) : m_(m), w_(w), out_(out), path_(out.shared_path()) {
    if (path_.empty()) throw UsageError("HEADSEP_ROWS=offsets: the rows must go to a regular file");
  }
  void prepare(const BatchResult& res, std::unique_ptr<SinkPartial>& partial) const override {
    int owner = 0;
    std::uint64_t bytes = 0;
    if (!m_.remote_rows(res.index, owner, bytes)) w_.prepare(res, partial);
  }
  void consume(const BatchResult& res, SinkPartial* partial) override {
    int owner = 0;
    std::uint64_t bytes = 0;
    if (!m_.remote_rows(res.index, owner, bytes)) return w_.consume(res, partial);
    Out o;
    o.u64(out_.position());
    o.str(path_);
    m_.reply(owner, o.take());
    out_.skip(bytes);
    m_.forget_rows(res.index);
  }

 private:
  Merger& m_;
  ResultWriter& w_;
  OutputFile& out_;
  std::string path_;
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

std::unique_ptr<ChunkExchange> make_merger(const ReportSource& source, bool full) {
  if (auto* csv = dynamic_cast<const detail::RangedCsv*>(&source))
    return std::make_unique<RangeMerger>(const_cast<detail::RangedCsv&>(*csv));
  return std::make_unique<Merger>(full);
}

bool rows_by_offset_requested() {
  const char* v = std::getenv("HEADSEP_ROWS");
  if (!v || !*v || std::strcmp(v, "gather") == 0) return false;
  if (std::strcmp(v, "offsets") == 0) return true;
  throw UsageError(std::string("HEADSEP_ROWS='") + v + "': expected gather (the default) or offsets");
}

void set_offset_rows(Format format, const RunInfo& info) {
  auto& c = offset_config();
  c.on = true, c.format = format, c.info = info;
}

std::unique_ptr<ResultSink> offset_rows_sink(ChunkExchange& merger, ResultWriter& writer, OutputFile& out) {
  auto* m = dynamic_cast<Merger*>(&merger);
  if (!m) throw UsageError("HEADSEP_ROWS=offsets does not combine with HEADSEP_CSV_SPLIT=ranges");
  return std::make_unique<OffsetRowsSink>(*m, writer, out);
}

void serve(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions opt, bool full) {
  std::unique_ptr<OffsetRows> rows;
  if (offset_config().on) rows = std::make_unique<OffsetRows>();
  Share share(rows.get());
  Forward forward(full, nullptr, rows.get());
  opt.exchange = &share;
  opt.progress = false;
  if (auto* csv = dynamic_cast<detail::RangedCsv*>(&source)) {
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
