// headsep example: the seed exercise from the CSV compiled into the binary (seed_data.cpp), run
// with the core's reader (no plugin needed), so it works from any folder.
#include <CLI/CLI.hpp>
#include <string_view>

#include "cli/commands.hpp"

namespace headsep {
extern const std::string_view seed_csv;
}

namespace headsep::cli {

CLI::App* add_example(CLI::App& app, RunArgs& ea) {
  auto* example = app.add_subcommand("example", "Print the seed exercise's output, computed from the bundled seed CSV");
  example->add_option("--report-html", ea.report_html, "Also write the HTML report (the seed's plot, distributions)");
  example->add_option("--plot-svg", ea.plot_svg, "Also write each figure as an SVG file into this folder");
  return example;
}

/// The seed exercise from the bundled CSV, with the core's reader (no plugin needed).
int example_cmd(const RunArgs& given) {
  RunArgs a;
  a.report_html = given.report_html, a.plot_svg = given.plot_svg, a.command_line = given.command_line;
  a.scenario_label = "the seed CSV (bundled), report ops_pressure_return";
  Setup s;
  CsvSourceOptions so;
  so.path = "qkv-multihead-report-scenarios.csv";
  so.bytes = seed_csv;
  auto specs = parse_axes(a.axes);
  so.features = axis_columns(specs);
  so.reports = {"ops_pressure_return"};
  s.source = open_csv_source(so);
  s.axes = AxisMap::bind(specs, s.source->schema().feature_names);
  s.weighting = make_table_weighting(s.source->schema().given_heads);
  return execute(s, a);
}

}  // namespace headsep::cli
