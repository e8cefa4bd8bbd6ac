// The runtime library's one entry point (runtime_commands.h): the command line of a runtime
// command, run over the commands this library registers.
#include "cli/run_cli.h"
#include "cli/runtime_commands.h"

extern "C" __attribute__((visibility("default"))) int trident_runtime_main(int argc, char** argv) {
  return trident::cli::run_cli(argc, argv);
}
