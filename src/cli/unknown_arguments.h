// The words of a command line that no subcommand or flag knows, each with the closest known
// name: CLI11 alone lists them last first and without a suggestion ("The following arguments
// were not expected: llama3-70b --modle").
#pragma once

#include <CLI/CLI.hpp>

#include "core/problems.h"

namespace trident::cli {

// And each option given more than once where it takes one value.
// Empty when every word is known (the parse failed for another reason).
Problems unknown_arguments(const CLI::App& app, int argc, char** argv);

}  // namespace trident::cli
