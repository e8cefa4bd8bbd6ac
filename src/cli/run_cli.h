// One `trident ...` command line, run in this process: what main() does, and what the Python
// module calls, so a Python call and a flag take the same path. Returns the exit code (0, 1 as the
// command defines it, 2 for unusable input, with every problem printed to stderr).
#pragma once

namespace trident::cli {

int run_cli(int argc, char** argv);

}  // namespace trident::cli
