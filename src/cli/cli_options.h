// Binds an OptionDef table to CLI11 flags, plus --config FILE.toml. --help shows each value's
// type and default from the table.
//
// After parsing, collect() returns the values: flags first, then the TOML file's keys for
// whatever the flags left unset. Keys that only other commands use are skipped and named on
// stderr, so one config file serves every command. Every problem (unknown key, malformed file) is added to the
// Problems given, so the command can report them with its own.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/output_path.h"

namespace trident::cli {

// Adds options to the keys a config file may hold (each command's CliOptions adds its own): for
// the commands set up elsewhere, such as the runtime's where only the planning ones are built.
void add_config_vocabulary(const std::vector<OptionDef>& defs);

class CliOptions {
 public:
  // config_file false: no --config, and the options are this command's own (a config file of
  // another command does not hold them), for a command such as generate that reads no settings file.
  CliOptions(CLI::App& app, std::vector<OptionDef> defs, bool config_file = true);
  OptionValues collect(Problems& problems) const;
  const std::vector<OptionDef>& defs() const { return defs_; }

  // The files these options read, for check_outputs(): the --config file and every option marked
  // as a path the command reads (input_path(): --cost, --data, --resume, ...) given by flag or file.
  std::vector<NamedPath> input_paths(const OptionValues& values) const;

 private:
  std::vector<OptionDef> others() const;  // options of the other commands

  std::vector<OptionDef> defs_;
  CLI::App* app_ = nullptr;
  // std::map keeps the addresses CLI11 writes into stable.
  std::map<std::string, std::string> text_;
  std::map<std::string, int64_t> flag_count_;
  std::map<std::string, CLI::Option*> option_;
  std::string config_path_;
  CLI::Option* config_option_ = nullptr;
};

}  // namespace trident::cli
