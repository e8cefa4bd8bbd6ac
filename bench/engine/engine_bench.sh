#!/usr/bin/env bash
# Engine benchmark: tokens/s of `trident train` and of the same model trained by PyTorch on this
# machine (same batch, threads, AdamW + clipping), both measured in this run, for a small model and
# GPT-2 124M, at one and at two threads. Both sides run the same OpenBLAS kernels: PyTorch gets the
# core type Trident's start-up table names (OPENBLAS_CORETYPE), and each prints the core it ran.
# An OPENBLAS_CORETYPE in the environment (a CI's) is set aside for both sides: Trident chooses the
# core from the CPU's features (cpuid), as it does for a user who sets none, and PyTorch runs the
# same (BENCH_KEEP_CORETYPE=1 keeps the environment's for both instead).
# PyTorch runs with jemalloc as its CPU tuning guide configures it. Also: the FP32 peak of the
# machine at each thread count (FMA loop) and Trident's share of it; peak resident memory next to
# the planner's prediction (fp32 recipe).
# usage: bench/engine/engine_bench.sh [BUILD_DIR] [--quick]
set -uo pipefail
BUILD=${1:-build}
QUICK=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
TRIDENT=$BUILD/src/cli/trident
THREADS=$(nproc)
PY=/usr/bin/python3
JEMALLOC=$(ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 2>/dev/null || true)
[ -x "$TRIDENT" ] || { echo "build trident first (make build)"; exit 2; }
FMA=$BUILD/bench/engine/engine_fma_peak
if [ ! -x "$FMA" ]; then
  FMA=$(mktemp -d)/engine_fma_peak
  g++ -O2 -march=native -fopenmp "$HERE/engine_fma_peak.cpp" -o "$FMA" || exit 1
fi
DATA=$(mktemp -d)
export TRIDENT_DATA_DIR=$DATA   # the bundled corpus, prepared once for this run

measure_peak() { OMP_NUM_THREADS=$1 "$FMA" | sed 's/.*"gflops": \([0-9.]*\).*/\1/'; }
# Best of three measurements: another process on a core can only lower it.
declare -A peak
for t in 1 2; do peak[$t]=$( (measure_peak $t; measure_peak $t; measure_peak $t) | sort -g | tail -1); done
echo "machine: $(nproc) cores, FP32 peak (FMA loop, best of 3): ${peak[1]} GFLOP/s at 1 thread, ${peak[2]} at 2"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "environment: $(env | grep -E '^OPENBLAS' | tr '\n' ' ')"
if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ -z "${BENCH_KEEP_CORETYPE:-}" ]; then
  echo "  OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE set aside for both sides: Trident chooses the core from cpuid, PyTorch runs the one Trident ran"
  unset OPENBLAS_CORETYPE
fi
echo

# name layers hidden heads seq vocab batch steps
configs=(
  "a 4 256 4 256 256 8 12"
  "gpt2-124m 12 768 12 512 50304 4 4"
)
[ "$QUICK" = "--quick" ] && configs=("a 4 256 4 256 256 8 4")
# jemalloc as PyTorch's CPU tuning guide configures it (memory kept, not returned to the OS;
# plain LD_PRELOAD with default decay made PyTorch 2-3x slower here).
TORCH_PRE=${JEMALLOC:+LD_PRELOAD=$JEMALLOC MALLOC_CONF=oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,muzzy_decay_ms:-1}

printf "%-10s %3s %12s %12s %7s %8s %-10s %-10s %22s %12s\n" cfg thr trident_tok/s torch_tok/s ratio MFU/peak \
  trident_blas torch_blas "trident peak/planned" torch_peak
for c in "${configs[@]}"; do
  read -r name L H A S V B N <<<"$c"
  for T in 1 2; do
    out=$(OMP_NUM_THREADS=$T "$TRIDENT" train --layers "$L" --hidden "$H" --heads "$A" --seq-len "$S" --vocab "$V" \
          --micro-batch-size "$B" --steps "$N" --eval-every 0 --eval-batches 1 --threads "$T" --log-every 1000 2>&1)
    tps=$(echo "$out" | sed -n 's/^done:.*; \([0-9.]*\) tokens\/s.*/\1/p')
    rss=$(echo "$out" | sed -n 's/^peak memory: \([0-9.]*\) MiB resident.* vs \([0-9.]*\) MiB planner.*/\1/p')
    planned=$(echo "$out" | sed -n 's/^peak memory: .* vs \([0-9.]*\) MiB planner.*/\1/p')
    flops=$(echo "$out" | sed -n 's/.*step FLOPs.* = \([0-9.]*\) GFLOP.*/\1/p')
    core=$(echo "$out" | sed -n 's/^  BLAS        OpenBLAS core \([A-Za-z0-9_]*\).*/\1/p')
    # The peak: the higher of the FMA loop's here and the one Trident measured at its start
    # (other processes lower either; a share above 100% would only say the peak came out low).
    own=$(echo "$out" | sed -n "s/.*MFU's peak \([0-9.]*\) GFLOP\/s.*/\1/p")
    pk=$(awk -v a="${peak[$T]}" -v b="${own:-0}" 'BEGIN{print (a > b ? a : b)}')
    [ "$name$T" = a1 ] && echo "$out" | grep '^  BLAS' | sed 's/^  /Trident: /'
    ref=$(env OPENBLAS_CORETYPE="$core" OPENBLAS_NUM_THREADS="$T" OMP_NUM_THREADS="$T" ${TORCH_PRE:-} \
          "$PY" "$HERE/engine_torch.py" "$L" "$H" "$A" "$S" "$V" "$B" "$N" "$T" | tail -1)
    ttps=$(echo "$ref" | sed 's/.*"tokens_per_s": \([0-9.e+]*\).*/\1/')
    trss=$(echo "$ref" | sed 's/.*"peak_rss_mib": \([0-9.e+]*\).*/\1/')
    tcore=$(echo "$ref" | sed -n 's/.*"blas_core": "\([^"]*\)".*/\1/p')
    if [ -z "$tps" ] || [ -z "$ttps" ]; then echo "$name $T: a run failed"; echo "$out" | tail -5; echo "$ref"; continue; fi
    ratio=$(awk -v a="$tps" -v b="$ttps" 'BEGIN{printf "%.2f", a/b}')
    mfu=$(awk -v t="$tps" -v f="$flops" -v b="$B" -v s="$S" -v p="$pk" 'BEGIN{printf "%.1f%%", 100*f*t/(b*s)/p}')
    printf "%-10s %3s %12.0f %12.0f %6sx %8s %-10s %-10s %10s/%-9s MiB %9.0f MiB\n" "$name" "$T" "$tps" "$ttps" "$ratio" \
      "$mfu" "$core" "$tcore" "$rss" "$planned" "$trss"
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (other processes on the 2 cores distort every figure)"
echo "ratio = Trident tokens/s / PyTorch tokens/s (mean step time after the first step, same batch and threads)."
echo "MFU/peak = model FLOPs (72 B s L h^2 (1 + s/6h + V/12Lh)) per second / peak at the same threads (the higher"
echo "  of the FMA loop above and the peak trident train measured at its start)."
echo "goals (GPT-2 124M): MFU/peak 65% or more, ratio 1.3x or more, at 1 and at 2 threads."
echo "*_blas = the OpenBLAS core type each side ran (openblas_get_corename)."
echo "trident peak = getrusage max RSS; planned = plan::stage_memory for the same model and batch (fp32 recipe)."
