// The commands that run the runtime (train, generate, bench, export, data). They live in a
// shared library of their own, next to the `trident` executable, which loads it only when one
// of them runs: `plan`, `lint`, `topo` and `simulate` start without CUDA, NCCL, MPI or a BLAS.
// The library's name is TRIDENT_RUNTIME_LIBRARY (set by CMake); its one entry point is
// trident_runtime_main, the same `run_cli` over these commands.
#pragma once

#include <string>
#include <vector>

#include "core/options.h"

namespace trident::cli {

struct RuntimeCommand {
  const char* name;
  const char* help;
  // The options a config file for it may hold (so the planning commands know every key); null:
  // it reads no config file.
  std::vector<OptionDef> (*config_options)() = nullptr;
};
const std::vector<RuntimeCommand>& runtime_commands();

// The help of a runtime command by name (its cmd_*.cpp registers it with this text).
const char* runtime_command_help(const std::string& name);

// Runs `trident NAME ...` for a runtime command: settles what the runtime's libraries read as
// they load (OpenMP's wait policy, OpenBLAS's core type), loads the library found next to the
// executable (/proc/self/exe) and calls its entry point. Exit code 2, naming the file, when it
// is missing or cannot load.
int run_runtime_command(int argc, char** argv);

}  // namespace trident::cli

extern "C" int trident_runtime_main(int argc, char** argv);
