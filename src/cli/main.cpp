// trident: plan, lint, simulate and train transformer layouts. Subcommands live in cmd_*.cpp.
#include "cli/run_cli.h"
#include "runtime/parallel/openmp_wait.h"

int main(int argc, char** argv) {
  trident::parallel::wait_passively_when_oversubscribed(argc, argv);  // may start trident again
  return trident::cli::run_cli(argc, argv);
}
