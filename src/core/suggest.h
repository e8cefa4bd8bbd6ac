// "Did you mean": the known name closest to a mistyped one (a flag, a preset, a config key).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trident {

// The choice nearest to `word` by edit distance (insert, delete, change or swap two neighbouring
// characters), when it is near enough to be a typo: at most a third of the word's length (at
// least 1, at most 3) edits away, or `word` is a prefix of exactly one choice. nullopt otherwise.
std::optional<std::string> closest_choice(const std::string& word, const std::vector<std::string>& choices);

// "did you mean 'X'? " (with `prefix` before X, e.g. "--"), or "" when no choice is close: the
// start of a fix, before the list of every choice.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& choices,
                         const std::string& prefix = "");

}  // namespace trident
