#include "plan/plan_options.h"

#include <fmt/format.h>

#include "core/units.h"

namespace trident::plan {

std::vector<OptionDef> plan_options() {
  return {
      {"top", "output", "how many candidate layouts to print (plan), default 5", false, "INT", "5"},
      {"json", "output", "print JSON instead of text", true, "", "off"},
      {"per-stage", "output", "show memory for every pipeline stage, not only the most loaded", true, "", "off"},
      {"overhead-gib", "output",
       fmt::format("memory per GPU for context, buffers and fragmentation, GiB (default {})", kDefaultOverheadGiB), false, "NUM", fmt::format("{}", kDefaultOverheadGiB)},
  };
}

OutputOptions resolve_output(const OptionValues& v, Problems& p) {
  OutputOptions o;
  o.overhead_bytes = kDefaultOverheadGiB * kGiB;
  if (auto x = v.get_int("top", p)) {
    if (*x <= 0) p.add(fmt::format("--top is {}, must be positive", *x), "give --top 1 or more");
    else o.top = int(*x);
  }
  if (auto x = v.get_bool("json", p)) o.json = *x;
  if (auto x = v.get_bool("per-stage", p)) o.per_stage = *x;
  if (auto x = v.get_double("overhead-gib", p)) {
    if (*x < 0) p.add(fmt::format("--overhead-gib is {}, must not be negative", *x), "give --overhead-gib 0 or more");
    else o.overhead_bytes = *x * kGiB;
  }
  return o;
}

}  // namespace trident::plan
