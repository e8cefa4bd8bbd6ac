// Text sources for `trident data prepare` and the bundled corpus.
//
// The bundled corpus is Debian's `fortunes` package (/usr/share/games/fortunes: a few MB of
// English quotations, jokes and poems, installed by scripts/install-deps.sh). `trident train`
// without --data prepares it once (byte-level tokens) and reuses the file afterwards.
#pragma once

#include <cstdint>
#include <string>

namespace trident::data {

constexpr const char* kBundledCorpusDir = "/usr/share/games/fortunes";

// The most text one source may hold: 256 MiB (a file, or all the files of a folder together).
// The text and its tokens (up to 4 bytes each) are held in memory while they are prepared.
constexpr uint64_t kMaxTextBytes = uint64_t(256) << 20;

// A file's text, or for a folder the text of its plain files (sorted by name; the fortune
// index files *.dat and the *.u8 links are skipped). Fortune separators ("%" lines) become blank
// lines; every other byte is kept as read (none is added). Throws InputError when nothing can be
// read, when the path is a FIFO, a device or another special file, or above kMaxTextBytes.
std::string read_text_source(const std::string& path);

// Where the prepared bundled corpus lives: $TRIDENT_DATA_DIR/fortunes.tok, else
// ~/.cache/trident/fortunes.tok. Prepared (byte-level) when missing; returns its path.
std::string bundled_token_file(bool verbose);

}  // namespace trident::data
