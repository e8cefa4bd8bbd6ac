// The options of `trident train` (see train_options.cpp): the training loop's (--steps, --data,
// --checkpoint, ...) and a distributed run's (the layout --tp --cp --ep --pp --dp --order, the
// parallel execution --schedule --virtual-stages --zero --sequence-parallel, and --recompute
// --precision --grad-bits, checked and refused where the runtime lacks them; --trace-comm
// --report FILE --comm-timeout S --stage-layers 2,3,3 --prediction-cluster FILE --bucket-mib N).
#pragma once

#include <vector>

#include "core/options.h"

namespace trident::capability {

std::vector<OptionDef> dist_train_options();     // the layout, parallel execution and run options
std::vector<OptionDef> train_command_options();  // model_options(), the loop's, dist_train_options()

}  // namespace trident::capability
