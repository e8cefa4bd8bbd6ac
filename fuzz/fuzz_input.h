// What every fuzz target shares: a scratch folder of its own for the readers that take paths,
// and the rule that a clean refusal (InputError, the CLI's exit 2) is a pass. Anything else a
// reader lets out (another exception, a crash, a sanitizer report, a hang) fails the run:
// libFuzzer reports the uncaught exception as a crash and keeps the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/problems.h"

namespace trident::fuzz {

// One folder per fuzzing process (libFuzzer's -jobs/-workers run several), removed at exit; in
// memory (/dev/shm) where there is one: a file written per input is ten times faster there.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path base =
        ::access("/dev/shm", W_OK) == 0 ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path(ec);
    std::string t = (base / "trident-fuzz-XXXXXX").string();
    if (!::mkdtemp(t.data())) std::abort();
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(scratch_dir(), ec); });
    return std::filesystem::path(t);
  }();
  return dir;
}

// Writes `n` bytes to NAME in the scratch folder (replacing it) and returns its path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t n) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(n));
  return path;
}

inline void remove_scratch(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove(scratch_dir() / name, ec);
}

// Runs a reader on one input: a refusal with problems is the product's answer to bad input.
template <class Reader>
int accept_refusal(Reader&& read) {
  try {
    read();
  } catch (const InputError& e) {
    if (e.problems().empty()) std::abort();  // a refusal must name what is wrong
  }
  return 0;
}

}  // namespace trident::fuzz
