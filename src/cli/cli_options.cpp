#include "cli/cli_options.h"

#include <algorithm>
#include <cstdio>

namespace trident::cli {

// Every option some command registered: a config file may carry them all (one file for plan,
// lint, topo, simulate and train); each command skips those it does not use. Filled while main
// sets up the subcommands, before anything is parsed.
static std::vector<OptionDef>& every_command_option() {
  static std::vector<OptionDef> all;
  return all;
}

CliOptions::CliOptions(CLI::App& app, std::vector<OptionDef> defs, bool config_file)
    : defs_(std::move(defs)), app_(&app) {
  if (config_file)
    config_option_ = app.add_option("--config", config_path_, "TOML file with any of these options (flags win)")
                         ->type_name("FILE");
  for (const OptionDef& d : defs_) {
    const std::string flag = "--" + d.name;
    if (d.is_flag) {
      flag_count_[d.name] = 0;
      option_[d.name] = app.add_flag(flag + ",!--no-" + d.name, flag_count_[d.name],
                                     d.help + " (switch, default " + (d.default_value.empty() ? "off" : d.default_value) + ")")
                            ->group(d.section);
    } else {
      text_[d.name] = "";
      option_[d.name] = app.add_option(flag, text_[d.name], d.help)
                            ->group(d.section)
                            ->type_name(d.type.empty() ? "TEXT" : d.type)
                            ->default_str(d.default_value.empty() ? "none" : d.default_value);
    }
  }
  if (config_file) add_config_vocabulary(defs_);
}

void add_config_vocabulary(const std::vector<OptionDef>& defs) {
  auto& all = every_command_option();  // once per name: the Python module sets commands up per call
  for (const OptionDef& d : defs)
    if (std::none_of(all.begin(), all.end(), [&](const OptionDef& o) { return o.name == d.name; })) all.push_back(d);
}

std::vector<OptionDef> CliOptions::others() const {
  std::vector<OptionDef> out;
  for (const OptionDef& d : every_command_option()) {
    bool mine = false;
    for (const OptionDef& m : defs_) mine = mine || m.name == d.name;
    if (!mine) out.push_back(d);
  }
  return out;
}

OptionValues CliOptions::collect(Problems& problems) const {
  OptionValues values(defs_);
  values.set_known_elsewhere(others());
  for (const OptionDef& d : defs_) {
    const CLI::Option* opt = option_.at(d.name);
    if (opt->count() == 0) continue;
    if (d.is_flag) values.set(d.name, flag_count_.at(d.name) > 0 ? "true" : "false", "--" + d.name);
    else values.set(d.name, text_.at(d.name), "--" + d.name);
  }
  if (config_option_ && config_option_->count() > 0) values.load_toml_file(config_path_, problems);
  if (!values.ignored().empty()) {
    // Said, not silent: these keys belong to other commands.
    std::string keys;
    for (const auto& k : values.ignored()) keys += (keys.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "trident %s: not used by this command, from %s: %s\n", app_->get_name().c_str(),
                 config_path_.c_str(), keys.c_str());
  }
  return values;
}

std::vector<NamedPath> CliOptions::input_paths(const OptionValues& values) const {
  std::vector<NamedPath> in;
  if (config_option_ && config_option_->count() > 0) add_input(in, {config_path_, "--config"});
  for (const OptionDef& d : defs_)
    if (d.reads_path)
      if (auto path = values.get_string(d.name)) add_input(in, {*path, "--" + d.name});
  return in;
}

}  // namespace trident::cli
