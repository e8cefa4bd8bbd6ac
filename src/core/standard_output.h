// Standard output that could not be written (a full disk: `> /dev/full`, a closed pipe) is a
// failure the command reports, never an exit 0 over text that went nowhere.
#pragma once

#include <string>

namespace trident {

// Flushes stdout and checks its error flag. On a failed write prints "trident COMMAND: error:
// could not write ... to standard output: REASON" to stderr and returns false (the caller exits 1).
bool standard_output_written(const std::string& command, const std::string& what);

}  // namespace trident
