// Input files: the one check every reader of a path a user names runs before opening it.
//
// A regular file is meant wherever Trident reads a file (--config, --cost, --data, the text of
// `data prepare`, a tokenizer, a checkpoint's manifest, a cluster file): a FIFO would block the
// open or the read forever, /dev/zero never ends, a directory reads as nothing. So the path is
// stat()ed first (without opening it) and anything but a regular file is a problem naming what
// it is; a read is bounded by a documented size, past which it is a problem too, never a
// std::bad_alloc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/problems.h"

namespace trident {

// A file a user named, for the messages: "token file" '--data'.
struct InputFile {
  std::string path;
  std::string what;  // "config file", "token file", "text source"
  std::string flag;  // the flag or argument that names it ("--config", "TEXT")
  std::string code;  // the problem code ("config-file", "token-file-open")
};

// "a directory", "a FIFO (named pipe)", "a character device", ... or "" for a regular file;
// "missing" when the path does not exist.
std::string special_file_kind(const std::string& path);

// The file's size when it is a regular file of at most `max_bytes`; else a problem ("... is a
// FIFO (named pipe), not a regular file", "... does not exist", "... is 20 GiB, above the 16 MiB
// a config file may have") and nullopt. Never opens the path.
std::optional<uint64_t> check_input_file(const InputFile& f, uint64_t max_bytes, Problems& problems);

// The whole text of the file after check_input_file (nullopt and a problem otherwise). A file
// that grows while it is read is read to the size it had.
std::optional<std::string> read_input_file(const InputFile& f, uint64_t max_bytes, Problems& problems);

// "16 MiB", "1 GiB": a bound as the messages say it.
std::string size_text(uint64_t bytes);

}  // namespace trident
