// A cost table (--cost FILE, the form of data/cost/builtin.toml): flat keys, [cost], [default]
// and per-GPU tables, applied for a GPU of the catalog that has its own table and for one that
// has none. Every value of a table that is accepted lies in its key's range.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cost_table.h"
#include "fuzz/fuzz_input.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* gpu : {"h100-80g", "a100-40g"}) {
    fuzz::accept_refusal([&] {
      Problems problems;
      CostTable table = builtin_cost(gpu_preset(gpu));
      apply_cost_toml(text, "fuzz-cost.toml", gpu_preset(gpu), table, problems);
      problems.throw_if_any();
      // A table that was accepted holds only values inside their ranges (0 and above-1 shares refused).
      for (const CostField& f : cost_fields())
        if (!cost_value_problem(f, table.*(f.member), f.name).empty()) __builtin_trap();
      describe(table);
    });
  }
  return 0;
}
