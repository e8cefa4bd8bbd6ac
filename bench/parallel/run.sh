#!/usr/bin/env bash
# Trident's MPI communicator against the raw OpenMPI calls it wraps, 2 ranks.
set -eu
build=${1:-build}
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$build/bench/parallel/bench_dist_comm_overhead"
