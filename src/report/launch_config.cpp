#include "report/launch_config.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <sstream>
#include <toml++/toml.h>

#include "core/run_values.h"

namespace trident {

namespace {

// The option's text as a TOML value of its type; text that does not parse stays a string so the
// reading command reports it with the option's name.
void insert_typed(toml::table& table, const OptionDef& def, const std::string& text) {
  const std::string key = [&] {
    std::string k = def.name;
    for (char& c : k)
      if (c == '-') c = '_';
    return k;
  }();
  if (def.is_flag) {
    table.insert_or_assign(key, text == "true" || text == "1" || text == "yes");
    return;
  }
  if (def.type == "INT" || def.type == "0|1|2|3" || def.type == "32|16") {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) {
      table.insert_or_assign(key, v);
      return;
    }
  }
  if (def.type == "NUM") {
    try {
      size_t used = 0;
      double v = std::stod(text, &used);
      if (used == text.size()) {
        table.insert_or_assign(key, v);
        return;
      }
    } catch (const std::exception&) {
    }
  }
  table.insert_or_assign(key, text);
}

}  // namespace

std::string config_toml(const std::vector<OptionDef>& defs, const OptionValues& given, const RunSpec& chosen,
                        const std::set<std::string>& skip, const std::vector<std::string>& header) {
  const auto chosen_texts = run_option_texts(chosen);
  toml::table root;
  std::vector<std::string> sections;
  for (const OptionDef& d : defs) {
    if (skip.count(d.name)) continue;
    std::optional<std::string> text;
    if (auto it = chosen_texts.find(d.name); it != chosen_texts.end()) text = it->second;
    else text = given.get_string(d.name);
    if (!text) continue;
    // A file the run reads (--hf-config, --cost, --data) by its absolute path: the emitted config
    // is read from wherever the user runs it, not only from where the plan ran.
    if (d.reads_path && !text->empty()) text = std::filesystem::absolute(*text).lexically_normal().string();
    if (!root.contains(d.section)) {
      root.insert(d.section, toml::table{});
      sections.push_back(d.section);
    }
    insert_typed(*root[d.section].as_table(), d, *text);
  }
  std::ostringstream out;
  for (const auto& line : header) out << "# " << line << "\n";
  // Sections in the order of the option table (model, cluster, layout, training, ...).
  for (const auto& s : sections) {
    toml::table one;
    one.insert(s, *root[s].as_table());
    out << "\n" << toml::toml_formatter(one) << "\n";
  }
  return out.str();
}

std::string shell_arg(const std::string& arg) {
  const size_t space = arg.find(' ');
  if (space == std::string::npos) return arg;
  const std::string value = arg.substr(space + 1);
  if (value.find_first_of("()*|$\"'[]{}<>;&!? ") == std::string::npos) return arg;
  return arg.substr(0, space) + " '" + value + "'";
}

std::string launch_text(const FrameworkLaunch& f) {
  std::string s;
  for (const auto& c : f.comments) s += "# " + c + "\n";
  for (const auto& [name, value] : f.env) s += fmt::format("export {}={}\n", name, value);
  if (!f.toml.empty()) return s + f.toml;
  for (size_t i = 0; i < f.args.size(); ++i) s += shell_arg(f.args[i]) + (i + 1 < f.args.size() ? " \\\n" : "\n");
  return s;
}

}  // namespace trident
