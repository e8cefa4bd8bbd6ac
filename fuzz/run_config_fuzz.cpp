// A run config (--config FILE.toml) as plan, lint, topo and simulate read it: every key through
// OptionValues::load_toml_text, then the whole run resolved and checked (resolve_run); and as
// `trident train` reads it: the model plus the distributed options and the trainer's run check
// (--stage-layers among them). A run that resolves must predict a finite step time.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cost_table.h"
#include "core/options.h"
#include "core/run_spec.h"
#include "fuzz/fuzz_input.h"
#include "plan/estimate.h"
#include "runtime/parallel/dist_train.h"
#include "train_app/planning.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::accept_refusal([&] {
    Problems problems;
    OptionValues values(concat({model_options(), cluster_options(), layout_options(), execution_options(),
                                cost_options()}));
    values.load_toml_text(text, "fuzz.toml", problems);
    problems.throw_if_any();
    const RunSpec run = resolve_run(values, true);
    // A run that resolves predicts a finite step: a cost value of 0 once made it NaN with exit 0.
    // (Up to 4096 GPUs: larger meshes take seconds per input.)
    if (run.layout.world_size() <= 4096 && !std::isfinite(plan::estimate(run, 0).time.step)) __builtin_trap();
  });
  fuzz::accept_refusal([&] {
    Problems problems;
    OptionValues values(concat({model_options(), parallel::dist_train_options()}));
    values.load_toml_text(text, "fuzz.toml", problems);
    problems.throw_if_any();
    parallel::TrainSettings s;
    s.planning = train_app::planning();
    s.run.model = resolve_model(values, problems);
    parallel::read_dist_train_options(values, s, problems);
    problems.throw_if_any();
    parallel::check_trainable(s, problems);
    problems.throw_if_any();
  });
  return 0;
}
