// Time to train with failures, as text (every number with the inputs that give it) and JSON.
// The formulas are plan/goodput.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/goodput.h"

namespace trident {

std::string goodput_text(const plan::Goodput& g);
nlohmann::json goodput_json(const plan::Goodput& g);
// plan --rank-by goodput: the candidates in that order, each with tokens/s x goodput = effective tokens/s.
std::string ranked_by_goodput_text(const std::vector<plan::RankedByGoodput>& ranked);

}  // namespace trident
