// Writing a report: --report-html PATH and --plot-svg DIR/<id>.svg, every file through OutputFile
// (temporary + rename), so nothing half-written is left if anything fails.
#include <filesystem>
#include <memory>

#include "headsep/error.hpp"
#include "headsep/output.hpp"
#include "report/report.hpp"

namespace headsep::report {

// A figure as its own file: links to other figures' anchors (a model grid's cells link to the maps
// on the page) point nowhere outside the page, so they are unwrapped, their content kept.
std::string standalone_svg(const Figure& f) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string& s = f.svg;
  std::size_t i = 0, open_links = 0;
  while (i < s.size()) {
    const std::size_t a = s.find("<a href=\"#", i), close = open_links ? s.find("</a>", i) : std::string::npos;
    if (close != std::string::npos && (a == std::string::npos || close < a)) {
      out.append(s, i, close - i), i = close + 4, --open_links;
    } else if (a != std::string::npos) {
      out.append(s, i, a - i), i = s.find('>', a) + 1, ++open_links;
    } else {
      out.append(s, i, std::string::npos), i = s.size();
    }
  }
  return out;
}

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
