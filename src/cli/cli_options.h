// Binds an OptionDef table to CLI11 flags, plus --config FILE.toml.
//
// After parsing, collect() returns the values: flags first, then the TOML file's keys for
// whatever the flags left unset. Every problem (unknown key, malformed file) is added to the
// Problems given, so the command can report them with its own.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/options.h"

namespace trident::cli {

class CliOptions {
 public:
  CliOptions(CLI::App& app, std::vector<OptionDef> defs);
  OptionValues collect(Problems& problems) const;

 private:
  std::vector<OptionDef> defs_;
  // std::map keeps the addresses CLI11 writes into stable.
  std::map<std::string, std::string> text_;
  std::map<std::string, int64_t> flag_count_;
  std::map<std::string, CLI::Option*> option_;
  std::string config_path_;
  CLI::Option* config_option_ = nullptr;
};

}  // namespace trident::cli
