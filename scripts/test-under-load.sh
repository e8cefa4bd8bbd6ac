#!/usr/bin/env bash
# The test suite on a busy machine: one busy loop per core holds every core while ctest runs,
# so a test that asserts a speed or waits on a too-tight timeout fails here first.
#   scripts/test-under-load.sh [BUILD_DIR] [CTEST ARGS...]   (default build; e.g. -R bench -j 2)
# The loops are killed on exit (also on Ctrl-C); the exit status is ctest's.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
[ -f "$build/CTestTestfile.cmake" ] || { echo "no tests in $build: build first (make build)" >&2; exit 2; }
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone honours OMP_NUM_THREADS
loops=()
stop_loops() { [ ${#loops[@]} -gt 0 ] && kill "${loops[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_loops EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < cores; ++i)); do
  yes > /dev/null &
  loops+=($!)
done
echo "test-under-load: ${#loops[@]} busy loops hold the $cores cores (pids ${loops[*]})"
(cd "$build" && ctest --output-on-failure "$@")
status=$?
echo "test-under-load: ctest exited $status with $cores busy loops running"
exit $status
