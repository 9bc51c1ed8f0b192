// axis-focus: parsing the "axes" and "designs" parameters (designs.hpp).
#include "designs.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace axis_focus {

using namespace headsep::sdk;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (;;) {
    auto j = s.find(sep, i);
    out.push_back(trim(s.substr(i, j == std::string::npos ? std::string::npos : j - i)));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::uint32_t axis_index(const std::vector<Axis>& axes, const std::string& name, const std::string& design) {
  for (std::uint32_t c = 0; c < axes.size(); ++c)
    if (axes[c].name == name) return c;
  std::string have;
  for (const auto& a : axes) have += (have.empty() ? "" : ", ") + a.name;
  throw ParamError("parameter 'designs': design '" + design + "' names axis '" + name + "'; axes: " + have);
}

}  // namespace

std::vector<Axis> parse_axes(const std::string& spec, const SchemaView& schema) {
  std::vector<Axis> out;
  for (const auto& part : split(spec, ';')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0) throw ParamError("parameter 'axes': '" + part + "' is not name=column+...");
    Axis a{trim(part.substr(0, eq)), {}};
    const std::string rhs = part.substr(eq + 1);
    std::size_t i = 0;
    while (i < rhs.size()) {
      double sign = 1.0;
      while (i < rhs.size() && (rhs[i] == ' ' || rhs[i] == '+' || rhs[i] == '-')) sign = rhs[i++] == '-' ? -sign : sign;
      std::size_t j = i;  // a term ends at + or - that is not an exponent's sign
      while (j < rhs.size() && rhs[j] != '+' &&
             !(rhs[j] == '-' && j > i && rhs[j - 1] != 'e' && rhs[j - 1] != 'E' && rhs[j - 1] != '*'))
        ++j;
      std::string term = trim(rhs.substr(i, j - i));
      double k = 1.0;
      if (auto star = term.find('*'); star != std::string::npos) {
        std::string num = trim(term.substr(0, star));
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), k);
        if (ec != std::errc() || p != num.data() + num.size())
          throw ParamError("parameter 'axes': bad coefficient '" + num + "' in axis '" + a.name + "'");
        term = trim(term.substr(star + 1));
      }
      if (term.empty()) throw ParamError("parameter 'axes': empty term in axis '" + a.name + "'");
      a.terms.emplace_back(schema.feature_index(term), sign * k);
      i = j;
    }
    if (a.terms.empty()) throw ParamError("parameter 'axes': axis '" + a.name + "' has no columns");
    out.push_back(std::move(a));
  }
  if (out.empty()) throw ParamError("parameter 'axes' defines no axis");
  return out;
}

std::vector<Design> parse_designs(const std::string& spec, const std::vector<Axis>& axes, double default_sharpness) {
  std::vector<Design> designs;
  for (const auto& item : split(spec, ';')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ParamError("parameter 'designs': '" + item + "' is not name=axis[@sharpness],axis[@sharpness],...");
    Design d{trim(item.substr(0, eq)), {}};
    for (const auto& h : split(item.substr(eq + 1), ',')) {
      auto at = h.find('@');
      std::string axis = trim(h.substr(0, at));
      double sharp = default_sharpness;
      if (at != std::string::npos) {
        std::string v = trim(h.substr(at + 1));
        char* end = nullptr;
        sharp = std::strtod(v.c_str(), &end);
        if (v.empty() || *end || !std::isfinite(sharp))
          throw ParamError("parameter 'designs': design '" + d.name + "': sharpness '" + v + "' is not a number");
      }
      d.heads.push_back({axis_index(axes, axis, d.name), sharp});
    }
    if (!designs.empty() && d.heads.size() != designs[0].heads.size())
      throw ParamError("parameter 'designs': design '" + d.name + "' has " + std::to_string(d.heads.size()) +
                        " heads but '" + designs[0].name + "' has " + std::to_string(designs[0].heads.size()) +
                        " (every design needs the same number of heads)");
    designs.push_back(std::move(d));
  }
  if (designs.empty()) throw ParamError("parameter 'designs' defines no design");
  return designs;
}

}  // namespace axis_focus
