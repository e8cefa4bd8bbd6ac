#include "core/standard_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trident {

bool standard_output_written(const std::string& command, const std::string& what) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int err = errno;
  if (flushed && !std::ferror(stdout)) return true;
  if (err == 0) {
    // An earlier flush failed and errno has moved on since: one more byte (the text is lost
    // already) says why.
    std::clearerr(stdout);
    if (std::fputc('\n', stdout) == EOF || std::fflush(stdout) != 0) err = errno;
  }
  std::fprintf(stderr, "trident %s: error: could not write %s to standard output: %s\n", command.c_str(), what.c_str(),
               err ? std::strerror(err) : "a write failed");
  return false;
}

}  // namespace trident
