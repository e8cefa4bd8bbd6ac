// Measures how busy the machine was over an interval (the record, MachineLoad, is in core/machine_load.h).
#pragma once

#include "core/machine_load.h"

namespace trident::engine {

// Started at construction; stop() gives the load since then (it can be called more than once).
class LoadProbe {
 public:
  explicit LoadProbe(int threads = 1);
  MachineLoad stop() const;

 private:
  int threads_;
  bool known_ = false;
  double wall0_ = 0, self0_ = 0, busy0_ = 0;
};

}  // namespace trident::engine
