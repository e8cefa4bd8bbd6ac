// One `trident ...` command line, run in this process: what main() does, and what the Python
// module calls, so a Python call and a flag take the same path. Returns the exit code (0, 1 as the
// command defines it, 2 for unusable input, with every problem printed to stderr).
#pragma once

#include <string>

namespace trident::cli {

int run_cli(int argc, char** argv);

// What `--NAME` is to `trident COMMAND`: a switch (no value; --no-NAME its off form), an option
// that takes a value (--html FILE), or none of its flags (also for an unknown command). For the
// Python module, which must not pass True to an option that takes a value.
enum class FlagKind { Unknown, Switch, Value };
FlagKind flag_kind(const std::string& command, const std::string& name);

}  // namespace trident::cli
