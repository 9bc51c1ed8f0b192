// Writing a report: --report-html PATH and --plot-svg DIR/<id>.svg, every file through OutputFile
// (temporary + rename), so nothing half-written is left if anything fails.
#include <filesystem>
#include <memory>

#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "report/report.hpp"

namespace headsep::report {

std::string standalone_svg(const Figure& f) { return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + f.svg; }

void write(const ReportData& d, const std::string& html_path, const std::string& svg_dir) {
  const auto figs = figures(d);
  // Every file goes through OutputFile: nothing half-written is left if anything fails.
  std::vector<std::unique_ptr<OutputFile>> files;
  if (!svg_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(svg_dir, ec);
    if (ec) throw Error("--plot-svg " + svg_dir + ": cannot create the folder: " + ec.message());
    for (const auto& f : figs) {
      files.push_back(std::make_unique<OutputFile>((std::filesystem::path(svg_dir) / (f.id + ".svg")).string()));
      files.back()->write(standalone_svg(f));
    }
  }
  if (!html_path.empty()) {
    files.push_back(std::make_unique<OutputFile>(html_path));
    files.back()->write(html(d, figs));
  }
  for (auto& f : files) f->commit();
}

}  // namespace headsep::report
