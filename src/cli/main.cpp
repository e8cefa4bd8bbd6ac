// trident: plan, lint, simulate and train transformer layouts. Subcommands live in cmd_*.cpp;
// those that run the runtime are loaded from its library only when they run (runtime_commands.h).
#include "cli/run_cli.h"
#include "cli/runtime_commands.h"

#include <string>

int main(int argc, char** argv) {
  for (const auto& c : trident::cli::runtime_commands())
    if (argc >= 2 && argv[1] == std::string(c.name)) return trident::cli::run_runtime_command(argc, argv);
  return trident::cli::run_cli(argc, argv);
}
