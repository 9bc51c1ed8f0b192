// headsep sweep: one report set run once per value of one plugin parameter; the quantiles per
// value and scenario as a table, --json and the report's sweep figure.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string_view>

#include "cli/commands.hpp"
#include "headsep/error.hpp"
#include "support/text_util.hpp"

namespace headsep::cli {

CLI::App* add_sweep(CLI::App& app, SweepArgs& sw) {
  RunArgs& sa = sw.job;
  auto* sweepc = app.add_subcommand("sweep", "Run one report set over a range of a plugin parameter (docs/REPORTS.md)");
  sweepc->add_option("--vary", sw.vary, "KEY=LO:HI:N or KEY=V1,V2,... (a -p key, e.g. axis-focus.single_sharpness=0.25:4:9)");
  sweepc->add_option("--scenario,-s", sa.scenario, "Scenario generator plugin");
  sweepc->add_option("--weighting,-w", sa.weighting, "Weighting scheme plugin");
  add_job_options(*sweepc, sa);
  sweepc->add_option("--threads", sa.threads, "Worker threads (0 = all cores)");
  add_engine_options(*sweepc, sa);
  sweepc->add_option("--json", sw.json, "Write the sweep (quantiles per value and scenario) as JSON");
  sweepc->add_option("--report-html", sa.report_html, "Write the sweep's HTML report");
  sweepc->add_option("--plot-svg", sa.plot_svg, "Write the sweep's figure as SVG into this folder");
  sweepc->add_flag("--quiet,-q", sa.quiet, "No table");
  return sweepc;
}

namespace {

/// The sweep JSON's run block: the plugins of the first value's job, with the swept parameter
/// shown as --vary gave it (LO:HI:N or a list), and --vary among the options.
RunProvenance sweep_provenance(const RunArgs& a, const Setup& s, const RunOptions& opt, const std::string& key,
                               const std::string& vary) {
  const RunInfo info = run_info(s);
  RunProvenance r = provenance(a, s.plugins, opt, info.axis_names, info.attention);
  const std::string values = vary.substr(std::min(vary.size(), vary.find('=') + 1));
  for (auto& p : r.plugins)
    for (auto& [k, v] : p.params)
      if (k == key || p.name + "." + k == key) v = values;
  r.options = {{"vary", vary}, {"bins", std::to_string(a.bins)}};
  return r;
}

}  // namespace

/// headsep sweep: the run's report set once per value of one plugin parameter (the report set is
/// generated again for each value: docs/REPORTS.md has the measured cost).
int sweep_cmd(const SweepArgs& args) {
  RunArgs a = args.job;
  std::string vary = args.vary;
  const std::string& json = args.json;
  if (!a.format.empty() || !a.output.empty() || !a.per_report.empty() || !a.summary.empty() || !a.attention.empty())
    throw UsageError("sweep writes --json, --report-html and --plot-svg only");
  if (vary.empty())  // -p KEY=LO:HI:N names the swept parameter too
    for (auto it = a.params.begin(); it != a.params.end(); ++it) {
      auto parts = split(std::string_view(*it).substr(std::min(it->size(), it->find('=') + 1)), ':');
      if (parts.size() == 3 && parse_finite_double(parts[0]) && parse_finite_double(parts[1]) && parse_finite_double(parts[2])) {
        vary = *it;
        a.params.erase(it);
        break;
      }
    }
  if (vary.empty()) throw UsageError("sweep needs --vary KEY=LO:HI:N or KEY=V1,V2,... (or one -p KEY=LO:HI:N)");
  const auto spec = report::parse_sweep(vary);
  RunOptions opt = run_options(a);
  report::Sweep sw = report::make_sweep(spec);
  RunStats total;
  RunProvenance origin;  // the summary's run block: the first value's plugins, the swept key as given
  RunInfo shape;         // heads and axes, for the report's header
  for (std::size_t i = 0; i < spec.values.size(); ++i) {
    RunArgs v = a;
    v.quiet = true, v.sweep_value = true, v.report_html.clear(), v.plot_svg.clear();
    v.params.push_back(spec.key + "=" + spec.values[i]);
    Setup s = build_setup(v);
    if (i == 0) origin = sweep_provenance(a, s, opt, spec.key, vary), shape = run_info(s);
    execute(s, v, [&](const Summary& sum, const RunStats& st) {
      report::add_sweep_run(sw, i, sum, st.seconds);
      total.reports += st.reports, total.groups += st.groups, total.seconds += st.seconds;
    });
    if (!a.quiet) std::fprintf(stderr, "sweep: %s=%s (%zu of %zu)\n", spec.key.c_str(), spec.values[i].c_str(), i + 1, spec.values.size());
  }
  if (!json.empty()) {
    OutputFile out(json);
    out.write(stamp_summary(report::sweep_json(sw), "sweep", origin, 2));
    out.commit();
  }
  if (!a.report_html.empty() || !a.plot_svg.empty()) {
    report::ReportData d;
    d.header = report_header(a, opt, total, shape.attention);
    d.header.params.push_back("--vary " + vary);
    // Every value runs the same report set: the header counts one value's reports, not the sum.
    const std::uint64_t n = spec.values.size();
    d.header.reports_text = report::count(total.reports / n) + " per value × " + std::to_string(n) + " values (" +
                            report::count(total.groups / n) + " report × scenario groups per value)";
    d.axes = shape.axis_names, d.heads = shape.heads;
    d.sweep = sw;
    report::write(d, a.report_html, a.plot_svg);
  }
  if (!a.quiet) std::fprintf(data_stdout(), "%s", report::sweep_table(sw).c_str());
  return 0;
}

}  // namespace headsep::cli
