// The planning side of `trident train`: what the trainer (runtime/parallel, which links no
// planner) is handed from plan/, rehearse/ and report/. Every caller of parallel::run_training or
// parallel::check_trainable sets TrainSettings::planning = planning().
#pragma once

#include "runtime/parallel/train_planning.h"

namespace trident::train_app {

parallel::TrainPlanning planning();

}  // namespace trident::train_app
