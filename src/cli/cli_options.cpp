#include "cli/cli_options.h"

namespace trident::cli {

CliOptions::CliOptions(CLI::App& app, std::vector<OptionDef> defs) : defs_(std::move(defs)) {
  config_option_ = app.add_option("--config", config_path_, "TOML file with any of these options (flags win)");
  for (const OptionDef& d : defs_) {
    const std::string flag = "--" + d.name;
    if (d.is_flag) {
      flag_count_[d.name] = 0;
      option_[d.name] = app.add_flag(flag + ",!--no-" + d.name, flag_count_[d.name], d.help)->group(d.section);
    } else {
      text_[d.name] = "";
      option_[d.name] = app.add_option(flag, text_[d.name], d.help)->group(d.section);
    }
  }
}

OptionValues CliOptions::collect(Problems& problems) const {
  OptionValues values(defs_);
  for (const OptionDef& d : defs_) {
    const CLI::Option* opt = option_.at(d.name);
    if (opt->count() == 0) continue;
    if (d.is_flag) values.set(d.name, flag_count_.at(d.name) > 0 ? "true" : "false", "--" + d.name);
    else values.set(d.name, text_.at(d.name), "--" + d.name);
  }
  if (config_option_->count() > 0) values.load_toml_file(config_path_, problems);
  return values;
}

}  // namespace trident::cli
