// The executable's side of the runtime commands (runtime_commands.h): each is listed in the help
// and known to the did-you-mean of mistyped commands, and runs from the runtime library.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "launch/blas_core.h"
#include "launch/openmp_wait.h"

namespace trident::cli {

namespace {

// main() hands a runtime command to run_runtime_command before parsing: these stand for them in
// `trident --help` and in the suggestions for a mistyped command.
const int kListed = [] {
  for (const RuntimeCommand& c : runtime_commands())
    register_command({c.name, c.help, [](CLI::App& cmd) -> Runner {
                        cmd.allow_extras();
                        return [] {
                          std::fprintf(stderr, "trident: error: a runtime command runs only as `trident COMMAND ...`\n");
                          return 2;
                        };
                      }});
  return 0;
}();

std::filesystem::path runtime_library_path() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : self.parent_path()) / TRIDENT_RUNTIME_LIBRARY;
}

}  // namespace

int run_runtime_command(int argc, char** argv) {
  launch::wait_passively_when_oversubscribed(argc, argv);
  launch::choose_blas_core();
  const std::filesystem::path lib = runtime_library_path();
  std::error_code ec;
  if (!std::filesystem::exists(lib, ec)) {
    std::fprintf(stderr,
                 "trident: error: `trident %s` runs from the runtime library %s, which is missing\n"
                 "  fix: build it (make build builds it next to the trident executable), or put %s beside %s\n",
                 argv[1], lib.c_str(), TRIDENT_RUNTIME_LIBRARY, lib.parent_path().c_str());
    return 2;
  }
  // RTLD_GLOBAL: Open MPI's plugins, loaded by MPI_Init, find libmpi's symbols in the global scope.
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    std::fprintf(stderr,
                 "trident: error: `trident %s` cannot load the runtime library: %s\n"
                 "  fix: install what it links (scripts/install-deps.sh; a CUDA build needs the CUDA toolkit's "
                 "libraries), or rebuild\n",
                 argv[1], dlerror());
    return 2;
  }
  using Entry = int (*)(int, char**);
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "trident_runtime_main"));
  if (!entry) {
    std::fprintf(stderr, "trident: error: %s has no entry point trident_runtime_main: rebuild it (make build)\n",
                 lib.c_str());
    return 2;
  }
  return entry(argc, argv);
}

}  // namespace trident::cli
