// headsep — the CSV split into byte ranges aligned to report boundaries (docs/DISTRIBUTED.md,
// "The two choices, measured"): the measured alternative to rank 0 reading, selected with
// --mpi-csv ranges; not the default (not faster on the machine measured, and see Limits).
//
// Every rank maps the file. The rows after the header are cut into M raw blocks of S bytes;
// block j belongs to rank j mod K. Where a block really starts needs the quote state there (a
// quoted field may hold newlines): each rank counts the quotes and newlines of its own blocks,
// one MPI_Allreduce gives every rank the counts of all blocks, and the prefix sums give the quote
// state and the line number at every raw start. From there a block starts at the first report
// boundary: the first record whose report_id differs from that of the first whole record at or
// after the raw start. Every rank computes the same boundaries, so the blocks partition the rows
// exactly. Each rank parses its blocks with the core's CSV source (header + block, numbered from
// the block's first line, so errors name the file's lines) and computes them; rank 0 merges the
// blocks in file order, giving every report its global index as it goes.
//
// Limits of this path (checked or documented): --report and --attention (they need global
// report indices while computing) are refused; bare CR line ends are refused; a report whose
// rows resume in another block is not refused (one process refuses it); a weighting plugin that
// reads ReportBatch::first_report sees block-local indices on ranks other than 0.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "dist/comm.hpp"
#include "dist/csv_ranges.hpp"
#include "headsep/batch.hpp"

namespace headsep::dist {

namespace detail {

namespace {

struct Counts {
  std::uint64_t quotes = 0, newlines = 0, bare_cr = 0;
};

Counts count(const char* p, const char* e, const char* file_end) {
  Counts c;
  std::uint64_t q = 0, n = 0, r = 0;
  for (const char* x = p; x < e; ++x) {  // vectorized by the compiler
    q += *x == '"';
    n += *x == '\n';
    r += *x == '\r';
  }
  // Bare CRs: CRs not followed by LF (rare; refused, so CR LF pairs are all that remain).
  std::uint64_t crlf = 0;
  if (r)
    for (const char* x = p; x < e; ++x)
      if (*x == '\r' && x + 1 < file_end && x[1] == '\n') ++crlf;
  c.quotes = q, c.newlines = n, c.bare_cr = r - crlf;
  return c;
}

}  // namespace

RangedCsv::RangedCsv(const CsvSourceOptions& base, const Schema& schema) : base_(base), schema_(schema) {
  path_ = base.path;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path_, 0, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw InputError(path_, 0, "", std::string("cannot stat: ") + std::strerror(errno));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw InputError(path_, 0, "", std::string("cannot map: ") + std::strerror(errno));
    }
    data_ = static_cast<const char*>(m);
    ::madvise(m, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);
  schema_.scenario_names.clear();
}

RangedCsv::~RangedCsv() {
  current_.reset();
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

// The header record's end: past the BOM and blank lines, the first LF outside quotes.
std::uint64_t RangedCsv::header_end() const {
  std::uint64_t i = size_ >= 3 && std::memcmp(data_, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  while (i < size_ && (data_[i] == '\n' || data_[i] == '\r')) ++i;
  bool quoted = false;
  for (; i < size_; ++i) {
    if (data_[i] == '"') quoted = !quoted;
    else if (data_[i] == '\n' && !quoted) return i + 1;
  }
  return size_;
}

// One record from `p` (blank lines skipped first): its report_id field (unquoted) in `id`;
// returns the offset past the record, or `p` at the end of the file.
std::uint64_t RangedCsv::record(std::uint64_t p, std::string& id) const {
  while (p < size_ && (data_[p] == '\n' || data_[p] == '\r')) ++p;
  if (p >= size_) return size_;
  id.clear();
  std::size_t field = 0;
  bool quoted = false;
  for (; p < size_; ++p) {
    const char c = data_[p];
    if (quoted) {
      if (c == '"') {
        if (p + 1 < size_ && data_[p + 1] == '"') {
          if (field == c_report_) id += '"';
          ++p;
        } else {
          quoted = false;
        }
      } else if (field == c_report_) {
        id += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      ++field;
    } else if (c == '\n') {
      return p + 1;
    } else if (c != '\r' && field == c_report_) {
      id += c;
    }
  }
  return size_;
}

// Where block `j` starts: the first report boundary after the first record start at or after
// its raw start (quote state `quoted` there).
std::uint64_t RangedCsv::align(std::uint64_t raw, bool quoted) const {
  if (raw >= size_) return size_;
  std::uint64_t p = raw;
  if (!(data_[raw - 1] == '\n' && !quoted)) {
    for (; p < size_; ++p) {
      if (data_[p] == '"') quoted = !quoted;
      else if (data_[p] == '\n' && !quoted) break;
    }
    if (p >= size_) return size_;
    ++p;
  }
  std::string first, id;
  std::uint64_t next = record(p, first);
  if (next == p || next >= size_) return size_;
  for (;;) {
    const std::uint64_t at = next;
    next = record(at, id);
    if (next == at) return size_;
    if (id != first) return at;
    if (next >= size_) return size_;
  }
}

void RangedCsv::split(int rank, int ranks, std::uint64_t block_bytes) {
  header_ = header_end();
  {
    // The header's columns (report_id's index) from the core's reader.
    CsvSourceOptions o = base_;
    header_bytes_.assign(data_, header_);
    o.bytes = header_bytes_;
    auto probe = open_csv_source(o);  // validates the header as one process would
    (void)probe;
    // report_id's column: parse the header record's field names.
    std::size_t field = 0;
    std::string name;
    std::uint64_t i = size_ >= 3 && std::memcmp(data_, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < header_ && (data_[i] == '\n' || data_[i] == '\r')) ++i;
    bool quoted = false, found = false;
    auto flush = [&] {
      const auto b = name.find_first_not_of(" \t"), e = name.find_last_not_of(" \t");
      if (b != std::string::npos && name.substr(b, e - b + 1) == "report_id" && !found) c_report_ = field, found = true;
      name.clear();
    };
    for (; i < header_; ++i) {
      const char c = data_[i];
      if (quoted) {
        if (c == '"' && i + 1 < header_ && data_[i + 1] == '"') name += '"', ++i;
        else if (c == '"') quoted = false;
        else name += c;
      } else if (c == '"') quoted = true;
      else if (c == ',') flush(), ++field;
      else if (c == '\n' || c == '\r') break;
      else name += c;
    }
    flush();
    if (!found) throw InputError(path_, 1, "report_id", "required column is missing from the header");
  }
  const std::uint64_t rows = size_ - header_;
  // Blocks: 4 per rank at least, at most 8 MiB (a batch or two each), at least 64 KiB.
  block_ = std::clamp<std::uint64_t>(rows / (4 * std::uint64_t(ranks)), std::uint64_t(64) << 10, std::uint64_t(8) << 20);
  // --mpi-csv-block: raw block size for tests (tiny blocks put boundaries everywhere).
  if (block_bytes) block_ = block_bytes;
  blocks_ = rows ? (rows + block_ - 1) / block_ : 0;
  auto raw = [&](std::uint64_t j) { return std::min(size_, header_ + j * block_); };
  // Counts of this rank's blocks; the sum over ranks gives every block's.
  std::vector<std::uint64_t> counts(3 * blocks_ + 3, 0);
  for (std::uint64_t j = std::uint64_t(rank); j < blocks_; j += std::uint64_t(ranks)) {
    const Counts c = count(data_ + raw(j), data_ + raw(j + 1), data_ + size_);
    counts[3 * j] = c.quotes, counts[3 * j + 1] = c.newlines, counts[3 * j + 2] = c.bare_cr;
  }
  if (rank == 0) {
    const Counts c = count(data_, data_ + header_, data_ + size_);
    counts[3 * blocks_] = c.quotes, counts[3 * blocks_ + 1] = c.newlines, counts[3 * blocks_ + 2] = c.bare_cr;
  }
  MPI_Allreduce(MPI_IN_PLACE, counts.data(), static_cast<int>(counts.size()), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::uint64_t quotes = counts[3 * blocks_], line = 1 + counts[3 * blocks_ + 1], bare = counts[3 * blocks_ + 2];
  for (std::uint64_t j = 0; j < blocks_; ++j) bare += counts[3 * j + 2];
  if (bare)
    throw InputError(path_, 0, "", "--mpi-csv ranges: the file has " + std::to_string(bare) +
                                       " bare CR line ends (CR without LF); run without --mpi-csv ranges");
  // Boundaries of this rank's blocks: the aligned start of j and of j + 1.
  std::vector<std::uint64_t> q(blocks_ + 1), l(blocks_ + 1);
  for (std::uint64_t j = 0; j <= blocks_; ++j) {
    q[j] = quotes, l[j] = line;
    if (j < blocks_) quotes += counts[3 * j], line += counts[3 * j + 1];
  }
  for (std::uint64_t j = std::uint64_t(rank); j < blocks_; j += std::uint64_t(ranks)) {
    Block b;
    b.index = j;
    b.begin = j == 0 ? header_ : align(raw(j), q[j] & 1);
    b.end = j + 1 == blocks_ ? size_ : align(raw(j + 1), q[j + 1] & 1);
    if (b.end < b.begin) b.end = b.begin;
    b.line = l[j] + static_cast<std::uint64_t>(std::count(data_ + raw(j), data_ + b.begin, '\n'));
    mine_.push_back(b);
  }
}

bool RangedCsv::open_next_block() {
  while (next_block_ < mine_.size()) {
    const Block& b = mine_[next_block_++];
    bool content = false;
    for (std::uint64_t i = b.begin; i < b.end && !content; ++i) content = data_[i] != '\n' && data_[i] != '\r';
    if (!content) continue;  // no record here (the core's source refuses a file without rows)
    current_.reset();
    block_bytes_.assign(header_bytes_);
    block_bytes_.append(data_ + b.begin, b.end - b.begin);
    CsvSourceOptions o = base_;
    o.bytes = block_bytes_;
    o.first_line = b.line;
    current_ = open_csv_source(o);
    current_block_ = b.index;
    return true;
  }
  current_.reset();
  return false;
}

bool RangedCsv::next(ReportBatch& batch, std::size_t max_reports) {
  for (;;) {
    if (!current_ && !open_next_block()) {
      last_block_ = blocks_;
      return false;
    }
    if (current_->next(batch, max_reports)) break;
    current_.reset();
  }
  // Scenario indices of the block's own schema -> this source's (names in order of first sight).
  const auto& names = current_->schema().scenario_names;
  for (auto& s : batch.scenarios) {
    auto [it, added] = ids_.emplace(names[s], static_cast<std::uint32_t>(schema_.scenario_names.size()));
    if (added) schema_.scenario_names.push_back(names[s]);
    s = it->second;
  }
  last_block_ = current_block_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    block_of_.push_back(current_block_);
  }
  return true;
}

std::uint64_t RangedCsv::block_of(std::uint64_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return block_of_.at(n - popped_);
}

void RangedCsv::forget_before(std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  while (popped_ < n && !block_of_.empty()) block_of_.pop_front(), ++popped_;
}

}  // namespace detail

std::unique_ptr<ReportSource> split_csv(const CsvSourceOptions& options, const Schema& schema, const Options& mpi) {
  auto r = std::make_unique<detail::RangedCsv>(options, schema);
  r->split(rank(), size(), mpi.csv_block);
  return r;
}

}  // namespace headsep::dist
