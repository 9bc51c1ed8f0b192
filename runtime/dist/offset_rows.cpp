// headsep — per-report rows written at offsets (--mpi-rows offsets; offset_rows.hpp): the
// measured alternative to gathering rows to rank 0 (docs/DISTRIBUTED.md, "The two choices,
// measured"). A worker formats its rows and writes them into rank 0's unfinished file at the
// offset rank 0 replies with; rank 0 leaves a gap of their length. One host only.
#include "dist/offset_rows.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dist/comm.hpp"
#include "dist/dist.hpp"
#include "dist/merger.hpp"

namespace headsep::dist {
namespace detail {
namespace {

struct OffsetConfig {
  bool on = false;
  Format format = Format::csv;
  RunInfo info;
};
OffsetConfig& offset_config() {
  static OffsetConfig c;
  return c;
}

// Rank 0, offset writes: its own chunks through the writer; another rank's chunk is a gap of its
// length, and that rank learns the gap's offset (chunk order: the writer wrote everything before).
class OffsetRowsSink final : public ResultSink {
 public:
  OffsetRowsSink(Merger& m, ResultWriter& w, OutputFile& out) : m_(m), w_(w), out_(out), path_(out.shared_path()) {
    if (path_.empty()) throw UsageError("--mpi-rows offsets: the rows must go to a regular file");
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

}  // namespace

bool offset_rows_on() { return offset_config().on; }

OffsetRows::OffsetRows() : file_(&captured_), writer_(make_writer(offset_config().format, file_, offset_config().info)) {
  captured_.clear();  // a header belongs to rank 0
}

OffsetRows::~OffsetRows() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t OffsetRows::take_rows() {
  waiting_.push_back(std::move(captured_));
  captured_.clear();
  return waiting_.back().size();
}

// At most 8 chunks wait (memory stays bounded when rank 0 is behind). Rank 0 replies when it
// consumes a chunk, and holds at most in_flight (2 x threads) chunks between taking and consuming
// them, so with one thread it never needs a 9th chunk from a rank that waits here.
void OffsetRows::pump(bool all) {
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

}  // namespace detail

void set_offset_rows(Format format, const RunInfo& info) {
  auto& c = detail::offset_config();
  c.on = true, c.format = format, c.info = info;
}

std::unique_ptr<ResultSink> offset_rows_sink(ChunkExchange& merger, ResultWriter& writer, OutputFile& out) {
  auto* m = dynamic_cast<detail::Merger*>(&merger);
  if (!m) throw UsageError("--mpi-rows offsets does not combine with --mpi-csv ranges");
  return std::make_unique<detail::OffsetRowsSink>(*m, writer, out);
}

}  // namespace headsep::dist
