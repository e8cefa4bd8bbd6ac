// Subcommand registry. Each `trident X` lives in its own cmd_X.cpp and registers itself with
// TRIDENT_COMMAND, so adding a command touches no shared file.
//
//   static int run_topo(CLI::App& cmd, ...);
//   TRIDENT_COMMAND("topo", "print the strategy <-> topology table", setup_topo);
//
// setup receives the subcommand's CLI::App to add its options and returns the function that
// runs it after parsing. The function returns the process exit code; bad input is reported by
// throwing InputError (main prints every problem and exits with 2).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace trident::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App&)>;

struct Command {
  std::string name;
  std::string help;
  Setup setup;
};

std::vector<Command>& command_registry();
int register_command(Command command);

}  // namespace trident::cli

#define TRIDENT_CONCAT_INNER(a, b) a##b
#define TRIDENT_CONCAT(a, b) TRIDENT_CONCAT_INNER(a, b)
#define TRIDENT_COMMAND(name, help, setup) \
  static const int TRIDENT_CONCAT(trident_command_, __LINE__) = ::trident::cli::register_command({name, help, setup})
