// trident: plan, lint, simulate and train transformer layouts. Subcommands live in cmd_*.cpp.
#include "cli/run_cli.h"

int main(int argc, char** argv) { return trident::cli::run_cli(argc, argv); }
