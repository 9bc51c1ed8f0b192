// headsep — the `headsep run` flags of a multi-rank run (dist::Options, docs/DISTRIBUTED.md).
// Compiled with or without MPI: the flags parse either way, and one process ignores them.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/dist.hpp"

namespace headsep::dist {
namespace {

// A flag taking one of two names: the first is the default, the one given is stored in `to`.
template <class E>
void choice(CLI::App& cmd, const std::string& flag, E& to, const std::vector<std::pair<std::string, E>>& names,
            const std::string& help) {
  const std::string expected = "expected " + names[0].first + " (the default) or " + names[1].first;
  cmd.add_option_function<std::string>(
         flag,
         [&to, names](const std::string& v) {
           for (const auto& [name, value] : names)
             if (name == v) to = value;
         },
         help)
      ->type_name(names[0].first + "|" + names[1].first)
      ->check(CLI::Validator(
          [names, expected](std::string& v) -> std::string {
            for (const auto& n : names)
              if (n.first == v) return {};
            return expected + ", not '" + v + "'";
          },
          ""));
}

}  // namespace

void add_options(CLI::App& cmd, Options& o) {
  choice(cmd, "--mpi-csv", o.csv, {{"rank0", Options::Csv::rank0}, {"ranges", Options::Csv::ranges}},
         "Under mpirun, CSV input: rank 0 reads it and hands chunks out (rank0), or every rank parses byte ranges of it (ranges)");
  choice(cmd, "--mpi-rows", o.rows, {{"gather", Options::Rows::gather}, {"offsets", Options::Rows::offsets}},
         "Under mpirun, per-report rows: sent to rank 0 (gather), or written by each rank into rank 0's file (offsets; one host)");
  cmd.add_option("--mpi-csv-block", o.csv_block, "With --mpi-csv ranges: block size in bytes (default: automatic)")
      ->type_name("BYTES")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            std::uint64_t n = 0;
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec == std::errc() && end == v.data() + v.size() && n > 0) return {};
            return "expected a number of bytes > 0, not '" + v + "'";
          },
          ""));
  cmd.add_flag("--mpi-stats", o.stats, "Under mpirun: bytes and messages each rank sent, on stderr at the end");
}

}  // namespace headsep::dist
