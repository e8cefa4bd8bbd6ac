// Writes a file a command produces (--emit, --html, export OUT): the one writer of Trident's
// report and config outputs, so every one of them gets the same path checks and error messages.
// Bad paths throw InputError naming the flag and the fix. It is core/output_path.h's check and
// atomic writer; a command that also reads files runs check_outputs() with them before any work.
#pragma once

#include <string>

namespace trident {

void write_output_file(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace trident
