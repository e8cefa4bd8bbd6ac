// The subcommand registry every cmd_*.cpp adds itself to (command.h).
#include "cli/command.h"

namespace trident::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

int register_command(Command command) {
  command_registry().push_back(std::move(command));
  return 0;
}

}  // namespace trident::cli
