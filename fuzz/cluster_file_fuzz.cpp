// A cluster file as `trident bench` writes it ([cluster] peaks and [cost] shares), read by the
// rehearsal report's prediction (rehearse::predict, --prediction-cluster FILE), which also
// runs the planner's estimate on what it read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/run_spec.h"
#include "fuzz/fuzz_input.h"
#include "rehearse/rehearsal_prediction.h"

using namespace trident;

namespace {
// A small rehearsal: pp 2 x dp 2 of a 2-layer GPT, as `mpirun -np 4 trident train --pp 2 --dp 2` runs.
const RunSpec& rehearsal() {
  static const RunSpec run = [] {
    OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
    for (auto [name, value] : {std::pair{"layers", "2"}, {"hidden", "64"}, {"heads", "4"}, {"seq-len", "64"},
                               {"vocab", "256"}, {"pp", "2"}, {"dp", "2"}, {"global-batch-size", "8"},
                               {"micro-batch-size", "2"}, {"precision", "fp32"}})
      v.set(name, value, "fuzz");
    return resolve_run(v, true);
  }();
  return run;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const RunSpec& run = rehearsal();
  const std::string path = fuzz::write_scratch("cluster.toml", data, size);
  fuzz::accept_refusal([&] { rehearse::predict(run, path, 2, ""); });
  return 0;
}
