// headsep — scale-out over MPI ranks (docs/DISTRIBUTED.md). Private to the runtime and the CLI.
//
// One run, K ranks: rank 0 (the merger) runs the engine's pipeline over every chunk in chunk
// order; ranks 1..K-1 compute a share of the chunks and send finished results (the batch parts
// sinks read, the metric blocks) to rank 0, whose sinks merge them exactly as one process would.
//   random-access sources: chunk i is computed by rank i mod K (rank 0 included);
//   sequential sources (CSV): rank 0 reads and parses, hands chunk i to rank i mod K.
// Without MPI compiled in (HEADSEP_HAVE_MPI unset) every function here is the one-process answer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "headsep/error.hpp"
#include "headsep/model_run.hpp"
#include "headsep/output.hpp"
#include "headsep/run.hpp"
#include "headsep/source.hpp"

namespace CLI {
class App;
}

namespace headsep::dist {

/// How a multi-rank run shares its work: the `headsep run` flags of docs/DISTRIBUTED.md. The
/// defaults are the choices measured there as the better ones; one process ignores them all.
struct Options {
  enum class Csv { rank0, ranges };
  enum class Rows { gather, offsets };
  /// --mpi-csv: rank 0 reads the CSV and hands chunks out, or every rank parses its byte ranges.
  Csv csv = Csv::rank0;
  /// --mpi-rows: per-report rows gathered to rank 0 and formatted there, or formatted by the
  /// rank that computed them and written at their offset in rank 0's file (one host only).
  Rows rows = Rows::gather;
  /// --mpi-csv-block BYTES: raw block size under --mpi-csv ranges (tests: tiny blocks put block
  /// starts everywhere); 0: automatic (4 blocks per rank at least, within 64 KiB..8 MiB).
  std::uint64_t csv_block = 0;
  /// --mpi-stats: one line per rank on stderr at the end (bytes and messages sent).
  bool stats = false;
};

/// Registers --mpi-csv, --mpi-rows, --mpi-csv-block and --mpi-stats on `cmd`, into `options`;
/// a bad value is a parse error naming the flag. Also without MPI compiled in (then no-ops).
void add_options(CLI::App& cmd, Options& options);

/// An error another rank reported, already naming that rank ("rank R (host): cause").
class RemoteError : public Error {
 public:
  using Error::Error;
};

/// MPI_Init_thread(MPI_THREAD_MULTIPLE) when the process was started by an MPI launcher (mpirun,
/// srun: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK set) or HEADSEP_MPI=1; never otherwise: a
/// singleton init costs ~0.5 s (measured, Open MPI 4.1) and a plain run needs none. HEADSEP_MPI=0
/// disables it. Call once, first thing in main.
void init(int* argc, char*** argv);
/// MPI_Finalize after a successful run (no-op when init() did not start MPI).
void finalize();
bool compiled() noexcept;
/// False until init() has started MPI.
bool active() noexcept;
int rank() noexcept;   ///< 0 when alone
int size() noexcept;   ///< 1 when alone
/// Ranks on this node (MPI_COMM_TYPE_SHARED): the default --threads divides the cores among them.
int local_size() noexcept;
/// "Open MPI v4.1.4, ..." or "" without MPI.
std::string library() ;
/// "rank R (host): " in a run of more than one rank, else "".
std::string where();

/// A failure of this process, already printed or to be printed by rank 0. On a worker rank: send
/// `what` to rank 0 (which prints it, removes its temporaries and stops the job) and wait to be
/// stopped. On rank 0 of a multi-rank run: MPI_Abort(exit_code) after the caller cleaned up.
/// Returns only when alone.
void fail(const std::string& what, int exit_code);

/// Rank 0: the exchange run() uses (RunOptions::exchange). `full`: per-report outputs need every
/// metric and the token layout; else (summary only) the rows the summary reads.
std::unique_ptr<ChunkExchange> make_merger(const ReportSource& source, bool full);

/// Ranks 1..K-1: compute this rank's share and send it to rank 0; returns when the run is over.
void serve(ReportSource& source, const Weighting& weighting, const AxisMap& axes, RunOptions options, bool full);

/// Ranks 1..K-1 of a `run --model` job: compute this rank's share through run_model (every
/// chunk's rows, token ids and dumps go to rank 0, whose make_merger(source, true) takes them);
/// returns when the run is over. `options.sinks` and `options.exchange` are set here.
void serve_model(ReportSource& source, const Architecture& model, const AxisMap& axes, ModelRunOptions options);

/// --mpi-rows offsets, every rank, before serve()/make_merger(): the rows' format and columns.
void set_offset_rows(Format format, const RunInfo& info);
/// Rank 0: the sink that replaces `writer` in the sinks: rank 0's chunks through `writer`, the
/// others' skipped in `out` after telling their rank where to write them.
std::unique_ptr<ResultSink> offset_rows_sink(ChunkExchange& merger, ResultWriter& writer, OutputFile& out);

/// --mpi-stats (options.stats): one line per rank on stderr at the end (bytes and messages sent).
void print_stats(const Options& options);

}  // namespace headsep::dist
