#!/usr/bin/env bash
# Builds the libFuzzer targets of the readers (fuzz/, clang, ASan + UBSan) in their own build
# folder and runs each on its seed corpus for a bounded time. Fails when any target finds an
# input that crashes, trips a sanitizer, leaks, throws anything but the product's refusal
# (InputError), runs past the per-input timeout or past the memory limit.
#   scripts/fuzz.sh [BUILD_DIR]          (default build-sanitize)
#   FUZZ_SECONDS=60 scripts/fuzz.sh      seconds per target (default 20)
#   FUZZ_TARGETS="tokenizer checkpoint"  a subset
# A finding is kept as BUILD_DIR/fuzz-findings/TARGET-crash-... ; replay it with
#   BUILD_DIR/fuzz/fuzz_TARGET FILE
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}   # ccache hits across clones in other folders
build=${1:-build-sanitize}
seconds=${FUZZ_SECONDS:-20}
targets=${FUZZ_TARGETS:-"run_config cluster_file cost_table token_file tokenizer checkpoint"}
jobs=${JOBS:-$(nproc)}

if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_CUDA=OFF -DTRIDENT_FUZZ=ON \
    "${launcher[@]}" > /dev/null
fi
cmake --build "$build" --target fuzz_targets -j "$jobs"

# Sanitizer reports stop the input at once, with a stack; leaks count (the readers own their memory).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
findings="$build/fuzz-findings"
mkdir -p "$findings"
failed=()
for t in $targets; do
  work="$build/fuzz-corpus/$t"  # new inputs go here; the committed seeds stay as they are
  mkdir -p "$work"
  log="$build/fuzz-$t.log"
  start=$(date +%s)
  if "$build/fuzz/fuzz_$t" "$work" "fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/$t-" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz $t: $runs inputs in $(( $(date +%s) - start )) s, $cov, no finding"
  else
    echo "fuzz $t: FINDING (log $log):"
    grep -E "ERROR|runtime error|terminate called|what\(\)|deadly signal|Test unit written" "$log" | head -8 | sed 's/^/  /'
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found inputs that break: ${failed[*]} (inputs in $findings)"
  exit 1
fi
