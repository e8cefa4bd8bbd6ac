#!/usr/bin/env bash
# Trident's MPI communicator against the raw OpenMPI calls it wraps, 2 ranks; then the bubble
# of 1F1B and ZB-H1 on a pp4 pipeline (4 ranks), measured beside the simulator's.
set -eu
build=${1:-build}
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$build/bench/parallel/bench_dist_comm_overhead"
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$build/bench/parallel/bench_dist_zero_bubble"
