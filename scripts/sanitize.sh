#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build folder
# (clang, CPU only; the same folder scripts/fuzz.sh uses, so CI compiles once for both).
#   scripts/sanitize.sh [BUILD_DIR]      (default build-sanitize)
# Every unit test runs, and the multi-rank tests but for the few listed below (each takes a
# minute or more sanitized, or measures time). Any sanitizer report fails its test: undefined
# behaviour stops the program (-fno-sanitize-recover), memory errors always do.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}   # ccache hits across clones in other folders
build=${1:-build-sanitize}
jobs=${JOBS:-$(nproc)}

if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_CUDA=OFF -DTRIDENT_FUZZ=ON \
    "${launcher[@]}" > /dev/null
fi
cmake --build "$build" -j "$jobs"

# Leaks are checked in every one-process test. Under mpirun they are not (detect_leaks=0):
# OpenMPI keeps ~120 KB in ~3,400 blocks from MPI_Init and its dlopen'ed components until exit,
# allocated through frames without frame pointers, so LeakSanitizer can neither unwind nor
# suppress them by name. Every other check (addresses, lifetimes, undefined behaviour) stays on.
asan_common=abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
# Thread-local storage is left out of LeakSanitizer's roots (use_tls=0): clang 14's LSan reads a
# bogus dynamic-TLS range for OpenMP's worker threads (libomp comes in with the dlopen'ed runtime
# library) under Debian 12's glibc and its tracer dies with SIGSEGV at exit of any run with two or
# more OpenMP threads ("Tracer caught signal 11"). Without TLS as a root a leak is only reported
# more often, never missed; glibc's own dlopen bookkeeping, held in TLS, is suppressed by name.
export LSAN_OPTIONS=${LSAN_OPTIONS:-use_tls=0:suppressions=$PWD/scripts/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The multi-rank tests are those labelled mpi (tests/CMakeLists.txt: trident_label_mpi; the test
# multi_rank_tests_carry_the_mpi_label finds one that starts mpirun without the label).

# Left out, each for its reason (the normal `make test` runs them all):
skip=(
  robust_cli_fuzz                      # ~1500 trident runs: 2.5 min plain, far longer sanitized
  engine_cli_train_resume_and_bad_input  # 1.5 min plain: long trainings
  report_html_pages_in_headless_chromium # the time is chromium's
  matches_pytorch                      # PyTorch reference runs (engine, llama): the time is PyTorch's
  export_safetensors_gpt2              # PyTorch again
  dist_equivalence_8ranks              # 8 ranks x 12 layouts: minutes sanitized (2-rank and 4-rank runs stay)
  dist_cli_every_train_option          # every train flag under mpirun: minutes sanitized
  dist_recompute_4ranks                # long multi-rank trainings
  slurm_                               # starts Slurm daemons
  bench                                # measures this machine's speed: meaningless sanitized
  dist_rehearsal_report_shows_the_prediction  # needs the bench fixture above
  stalled_rank_times_out               # a timing test: a slow sanitized rank is not a stall
  robust_resources_beyond_the_machine  # runs under ulimit -v, where ASan cannot map its shadow memory
)
exclude=$(IFS='|'; echo "${skip[*]}")
cd "$build"
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:$asan_common} \
  ctest --output-on-failure -j "$jobs" -LE mpi -E "$exclude" --timeout 900 || status=1
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:$asan_common} \
  ctest --output-on-failure -j "$jobs" -L mpi -E "$exclude" --timeout 900 || status=1
exit $status
