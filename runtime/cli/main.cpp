// headsep — command-line front end: builds the CLI11 app from one file per subcommand
// (commands.hpp), dispatches to the one given, and maps exceptions to exit codes. run_cli() is
// the app; the executable's main() (headsep_main.cpp) and the Python package's `headsep` command
// (python/src/cli.cpp) call it.
// Exit status: 0 ok, 1 bad input or plugin error (message on stderr), 2 usage error.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <new>
#include <vector>
#include <string>

#include "cli/commands.hpp"
#include "dist/dist.hpp"
#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "support/text_util.hpp"

namespace {

using namespace headsep;
using namespace headsep::cli;

/// The command line as a shell would read it back: the header of a report says what was run.
std::string shell_command_line(int argc, char** argv) {
  std::string cl;
  for (int i = 0; i < argc; ++i) {
    std::string w = argv[i];
    const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/@+%") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      w = q + "'";
    }
    cl += (i ? " " : "") + w;
  }
  return cl;
}

/// Edit distance (insert, delete, substitute, swap of neighbours): how close a typo is to a command.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

/// A first word that is no subcommand: the message names it and the nearest command, if any is
/// close (CLI11 alone says only that a subcommand is required). Empty when `word` is a command.
std::string unknown_command(const CLI::App& app, const std::string& word) {
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return {};
    const std::size_t d = distance(word, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  std::string msg = "unknown command '" + word + "'";
  if (best_d <= std::max<std::size_t>(2, word.size() / 3)) msg += "; did you mean '" + best + "'?";
  return msg + " (headsep --help lists the commands)";
}

/// A failure on any rank: one message, from rank 0, naming the rank; then every rank stops.
int failed(const char* kind, const std::string& what, int code) {
  // Bounded and escaped: a message may carry a plugin's or a file's text (ESC, CR/LF, 10 MB).
  const std::string cause = headsep::printable(headsep::dist::where() + what);
  if (headsep::dist::rank() == 0) std::fprintf(stderr, "headsep: %s%s\n", kind, cause.c_str());
  headsep::dist::fail(cause, code);
  return code;
}

/// Every subcommand's arguments and its place on the app, in the app's (--help) order.
struct Commands {
  RunArgs example_args, run_args;
  ScalingArgs scaling_args;
  SweepArgs sweep_args;
  PluginsArgs plugins_args;
  TokenizeArgs tokenize_args;
  std::string info_model;  // info --model DIR
  std::string temporaries = "unnamed";  // --temporaries: set_output_temporaries (headsep/output.hpp)
  CLI::App *example, *run, *scaling, *sweep, *plugins, *tokenize, *info, *version;

  explicit Commands(CLI::App& app)
      : example(add_example(app, example_args)),
        run(add_run(app, run_args)),
        scaling(add_scaling(app, scaling_args)),
        sweep(add_sweep(app, sweep_args)),
        plugins(add_plugins(app, plugins_args)),
        tokenize(add_tokenize(app, tokenize_args)),
        info(add_info(app, info_model)),
        version(app.add_subcommand("version", "Print headsep's version")) {
    // Last on their commands' --help, as options added once every command exists.
    run->add_flag("--slot-by-slot", run_args.slot_by_slot,
                  "Ask an every-slot weighting (ABI 1.3) for one scenario at a time: same output, for A/B timing");
    for (auto* c : {example, run, scaling, sweep})
      c->add_option("--temporaries", temporaries,
                    "Unfinished output files: unnamed (O_TMPFILE, linked in when complete; nothing is left even if "
                    "killed) or named (PATH.tmp-*, renamed when complete; left behind by SIGKILL)")
          ->capture_default_str();
  }

  /// Runs the subcommand given: on every rank for `run`, on rank 0 alone for the others.
  int dispatch() const {
    const bool lead = headsep::dist::rank() == 0;
    if (*example) return lead ? example_cmd(example_args) : 0;
    if (*sweep) return lead ? sweep_cmd(sweep_args) : 0;
    if (*run) return run_cmd(run_args);
    if (*scaling) return lead ? scaling_cmd(scaling_args) : 0;
    if (*plugins) return lead ? plugins_cmd(plugins_args) : 0;
    if (*tokenize) return lead ? tokenize_cmd(tokenize_args) : 0;
    if (*info) return lead ? info_cmd(info_model) : 0;
    if (*version) return lead ? (std::fprintf(headsep::data_stdout(), "headsep %s\n", HEADSEP_VERSION), 0) : 0;
    return 0;
  }
};

}  // namespace

namespace headsep::cli {

int run_cli(int argc, char** argv, const PluginHost& host) {
  set_plugin_host(host);
  CLI::App app{"headsep — how multi-head attention keeps relations apart"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("headsep ") + HEADSEP_VERSION);
  Commands commands(app);
  if (argc > 1 && argv[1][0] != '-') {
    if (const std::string msg = unknown_command(app, argv[1]); !msg.empty()) {
      std::fprintf(stderr, "headsep: %s\n", msg.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Under an MPI launcher: every rank runs `run` (rank 0 merges and writes); the other commands
  // run on rank 0 alone.
  headsep::dist::init(&argc, &argv);
  install_signal_handlers();
  protect_stdout();  // plugins' prints go to stderr, never into the data on stdout
  const std::string cl = shell_command_line(argc, argv);
  commands.run_args.command_line = commands.example_args.command_line = cl;
  commands.sweep_args.job.command_line = commands.scaling_args.job.command_line = cl;
  commands.sweep_args.job.command = "sweep", commands.scaling_args.job.command = "scaling";
  // Ranks 1..K-1 write no files: when the launcher stops them (rank 0 failed), they end quietly.
  if (headsep::dist::rank() != 0)
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  try {
    headsep::set_output_temporaries(headsep::parse_temporaries(commands.temporaries));
    const int rc = commands.dispatch();
    // What went to standard output (rows, the table) must have arrived: a full disk there is an
    // error, not a silent success.
    std::fflush(stdout);  // whatever plugins printed (to stderr)
    const int flushed = std::fflush(data_stdout()), err = errno;
    if (flushed != 0 || std::ferror(data_stdout()))
      throw Error(std::string("<stdout>: write failed: ") + (flushed != 0 ? std::strerror(err) : "write error"));
    headsep::dist::print_stats(commands.run_args.mpi);
    headsep::dist::finalize();
    return rc;
  } catch (const headsep::dist::RemoteError& e) {  // already names its rank
    std::fprintf(stderr, "headsep: error: %s\n", headsep::printable(e.what()).c_str());
    headsep::dist::fail(e.what(), 1);
    return 1;
  } catch (const UsageError& e) {
    return failed("", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return failed("error: ", "out of memory (docs/LIMITS.md)", 1);
  } catch (const std::exception& e) {
    return failed("error: ", e.what(), 1);
  }
}

}  // namespace headsep::cli
