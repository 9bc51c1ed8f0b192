// headsep — the scale-out layer when MPI is not compiled in: one process, always.
#include "dist/csv_ranges.hpp"
#include "dist/dist.hpp"

namespace headsep::dist {

void init(int*, char***) {}
void finalize() {}
bool compiled() noexcept { return false; }
bool active() noexcept { return false; }
int rank() noexcept { return 0; }
int size() noexcept { return 1; }
int local_size() noexcept { return 1; }
std::string library() { return {}; }
std::string where() { return {}; }
void fail(const std::string&, int) {}
std::unique_ptr<ChunkExchange> make_merger(const ReportSource&, bool) { return nullptr; }
void serve(ReportSource&, const Weighting&, const AxisMap&, RunOptions, bool) {}
void serve_model(ReportSource&, const Architecture&, const AxisMap&, ModelRunOptions) {}
void print_stats(const Options&) {}
void set_offset_rows(Format, const RunInfo&) {}
std::unique_ptr<ResultSink> offset_rows_sink(ChunkExchange&, ResultWriter&, OutputFile&) { return nullptr; }
std::unique_ptr<ReportSource> split_csv(const CsvSourceOptions&, const Schema&, const Options&) { return nullptr; }

}  // namespace headsep::dist
