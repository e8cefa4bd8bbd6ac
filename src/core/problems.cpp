#include "core/problems.h"

namespace trident {

static std::string summarise(const std::vector<Problem>& problems) {
  std::string text;
  for (const Problem& p : problems) {
    text += p.what;
    if (!p.fix.empty()) text += " (fix: " + p.fix + ")";
    text += "\n";
  }
  return text;
}

InputError::InputError(std::vector<Problem> problems)
    : std::runtime_error(summarise(problems)), problems_(std::move(problems)) {}

void Problems::throw_if_any() const {
  if (!list_.empty()) throw InputError(list_);
}

std::string join_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += (i + 1 == choices.size()) ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

}  // namespace trident
