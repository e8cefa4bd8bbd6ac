// The checks of a checkpoint manifest's contents, made once when CheckpointReader opens it.
//
// A manifest can parse as JSON and carry valid shard checksums yet contradict itself (crafted,
// or written by hand): a shape whose product overflows or exceeds the data on disk, a slice
// outside its tensor or its file, slices that overlap or leave holes, an unknown dtype, a key
// given twice, a shard name that points outside the directory, a value of the wrong type.
// Each is a Problem naming the tensor or file and the value, so the reader never allocates
// from an absurd shape, reads outside a file or throws a JSON library's exception text.
#pragma once

#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/problems.h"

namespace trident::checkpoint {

// Parses the manifest text; a syntax error or a key given twice in one object is a problem
// (JSON parsers keep the last of two equal keys silently). Returns null on a problem.
nlohmann::json parse_manifest(std::istream& in, const std::string& path, Problems& problems);

// Checks the parsed manifest of the checkpoint in `dir` (format, version, meta, files against
// the shard files on disk, every tensor's dtype, shape and slices). Adds every problem found.
void check_manifest(const nlohmann::json& manifest, const std::string& dir, int version, Problems& problems);

}  // namespace trident::checkpoint
