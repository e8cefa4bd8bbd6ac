// The rehearsal report of a `trident train` run, built from the trainer's step records
// (runtime/parallel/step_records.h): the measured shares beside the planner's prediction
// (rehearse::predict), as text (several ranks), JSON (--report) and a page (--html).
#pragma once

#include <memory>

#include "runtime/parallel/step_records.h"
#include "runtime/parallel/training_loop.h"

namespace trident::train_app {

// Made on every rank; rank 0's finish writes the report when the run has several ranks, --report
// or --html.
std::unique_ptr<parallel::StepSink> rehearsal_sink(const parallel::TrainSettings& s);

}  // namespace trident::train_app
