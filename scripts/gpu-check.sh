#!/usr/bin/env bash
# The GPU proof of the CUDA backend, in one call, on a machine with an NVIDIA GPU (H100/H200/A100) and
# PyTorch with CUDA:
#   1. builds the CUDA backend and its checks (cmake, only the needed targets, this GPU's arch)
#   2. CPU-side CUDA unit tests (cuda_tests)
#   3. every CUDA kernel against the CPU path (gpu_kernel_check: fp32 exact-ish, bf16 tolerances),
#      and the engine's own Trainer on CudaKernels vs CpuKernels (gpu_engine_check)
#   4. the NCCL communicator on real GPU buffers (gpu_nccl_check, one rank per GPU)
#   5. the whole GPT-2 model (fp32 and bf16) against PyTorch: logits, loss, every gradient and
#      10 AdamW training losses (gpu_gpt_check + tests/cuda/gpu_torch_check.py)
#   6. training throughput and MFU of GPT-2 124M (gpt2-small) and 350M (gpt2-medium), Trident
#      bf16 vs PyTorch eager and torch.compile on the same GPU, MFU against the bf16 matmul rate
#      measured in the same run (bench/gpu_backend/)
# Prints every figure and a summary; exit code 0 only if every check passed.
#
# Usage (from the repository root):  bash scripts/gpu-check.sh [--quick]
#   --quick      skip torch.compile (saves its compile time)
#   env: OUT (logs and results.txt; default /tmp/trident-gpu-check), MODEL_DIR (model-check binaries,
#        default /tmp/trident-gpu-model), BUILD (default build-gpu),
#        STEPS (timed benchmark steps, default 10), PYTHON (a python with torch+CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
OUT_DIR=${OUT:-/tmp/trident-gpu-check}
MODEL_DIR=${MODEL_DIR:-/tmp/trident-gpu-model}  # large binaries (logits, gradients): kept out of OUT
BUILD=${BUILD:-build-gpu}
STEPS=${STEPS:-10}
JOBS=$(nproc)
mkdir -p "$OUT_DIR"
declare -a SUMMARY=()
FAILED=0
note() { SUMMARY+=("$1"); echo "$1"; }
section() { echo; echo "=================== $* ($(date +%T))"; }
run_step() {  # name timeout_s command...: records PASS/FAIL
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@"
  local rc=$?
  if [ $rc -eq 0 ]; then note "PASS  $name"; else note "FAIL  $name (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; FAILED=1; fi
  return $rc
}

section "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | head -5
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
ARCH=${ARCH:-90}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3 python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
      PY=$p; break
    fi
  done
fi
if [ -n "$PY" ]; then
  "$PY" -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"
else
  note "FAIL  no python with torch and CUDA found (set PYTHON=...): PyTorch comparisons skipped"; FAILED=1
fi

section "build (sm_$ARCH, $JOBS jobs)"
TARGETS="cuda_tests gpu_kernel_check gpu_engine_check gpu_nccl_check gpu_gpt_check gpu_gpt_bench"
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_CUDA=ON -DTRIDENT_CUDA_ARCHS="$ARCH" \
     >"$OUT_DIR/cmake.log" 2>&1; then
  tail -30 "$OUT_DIR/cmake.log"; note "FAIL  cmake configure (see above)"; exit 1
fi
if ! cmake --build "$BUILD" -j "$JOBS" --target $TARGETS >"$OUT_DIR/build.log" 2>&1; then
  grep -E "error|Error" -A3 "$OUT_DIR/build.log" | head -40; note "FAIL  build (see above)"; exit 1
fi
note "PASS  build of $TARGETS"
BIN=$BUILD/tests/cuda

section "CPU-side CUDA unit tests"
run_step "cuda_tests" 60 "$BIN/cuda_tests" --gtest_brief=1

section "kernels vs the CPU path"
run_step "gpu_kernel_check (every kernel vs CPU)" 180 "$BIN/gpu_kernel_check"
run_step "gpu_engine_check (engine Trainer on CudaKernels vs CpuKernels)" 180 "$BIN/gpu_engine_check"

section "NCCL communicator"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
NGPU=$(( NGPU > 0 ? NGPU : 1 ))
if command -v mpirun >/dev/null 2>&1; then
  run_step "gpu_nccl_check ($NGPU rank(s), one per GPU)" 120 mpirun --allow-run-as-root --oversubscribe -np "$NGPU" "$BIN/gpu_nccl_check"
else
  run_step "gpu_nccl_check (1 rank, no mpirun)" 120 "$BIN/gpu_nccl_check"
fi

section "whole model vs PyTorch"
DIRS=""
for att in flash matmul; do
  for prec in fp32 bf16; do
    mkdir -p "$MODEL_DIR/$prec-$att"
    run_step "gpu_gpt_check $prec $att attention" 120 "$BIN/gpu_gpt_check" "$MODEL_DIR/$prec-$att" $prec $att \
      && DIRS="$DIRS $MODEL_DIR/$prec-$att"
  done
done
if [ -n "$PY" ] && [ -n "$DIRS" ]; then
  run_step "model vs PyTorch (logits, loss, gradients, 10 losses)" 300 "$PY" tests/cuda/gpu_torch_check.py $DIRS
fi

section "throughput: Trident bf16 vs PyTorch (same GPU, same batch)"
: >"$OUT_DIR/results.txt"
for cfg in "gpt2-small 16 1024" "gpt2-medium 8 1024"; do
  set -- $cfg
  model=$1 B=$2 T=$3
  peak=""
  for att in matmul flash; do
    echo "--- $model B=$B T=$T: Trident ($att attention)"
    timeout 240 "$BIN/gpu_gpt_bench" "$model" "$B" "$T" "$STEPS" $att | tee "$OUT_DIR/trident-$att-$model.log"
    grep '^RESULT' "$OUT_DIR/trident-$att-$model.log" >>"$OUT_DIR/results.txt" \
      || { note "FAIL  gpu_gpt_bench $model $att"; FAILED=1; }
    [ -z "$peak" ] && peak=$(grep -o 'matmul_tflops=[0-9.]*' "$OUT_DIR/trident-$att-$model.log" | cut -d= -f2)
  done
  if [ -n "$PY" ]; then
    modes="eager compile"; [ $QUICK -eq 1 ] && modes="eager"
    for mode in $modes; do
      echo "--- $model B=$B T=$T: PyTorch $mode"
      timeout 400 "$PY" bench/gpu_backend/gpu_torch_bench.py "$model" "$B" "$T" "$STEPS" "$mode" $peak \
        2>"$OUT_DIR/torch-$mode-$model.err" | tee "$OUT_DIR/torch-$mode-$model.log"
      grep '^RESULT' "$OUT_DIR/torch-$mode-$model.log" >>"$OUT_DIR/results.txt" \
        || { tail -5 "$OUT_DIR/torch-$mode-$model.err"; note "FAIL  PyTorch $mode $model"; FAILED=1; }
    done
  fi
done

section "summary"
for line in "${SUMMARY[@]}"; do echo "$line"; done
echo
printf "%-12s %-14s %12s %10s %8s %14s\n" model impl tokens/s TFLOP/s MFU "vs torch.compile"
for model in gpt2-small gpt2-medium; do
  ref=$(grep "impl=torch-compile model=$model " "$OUT_DIR/results.txt" | grep -o 'tokens_per_s=[0-9]*' | cut -d= -f2)
  grep "model=$model " "$OUT_DIR/results.txt" | while read -r line; do
    impl=$(echo "$line" | grep -o 'impl=[^ ]*' | cut -d= -f2)
    tps=$(echo "$line" | grep -o 'tokens_per_s=[0-9]*' | cut -d= -f2)
    tfl=$(echo "$line" | grep -o 'tflops=[0-9.]*' | head -1 | cut -d= -f2)
    mfu=$(echo "$line" | grep -o ' mfu=[0-9.]*' | cut -d= -f2)
    ratio=$([ -n "$ref" ] && awk -v a="$tps" -v b="$ref" 'BEGIN{printf "%.2fx", a/b}' || echo "-")
    printf "%-12s %-14s %12s %10s %7.1f%% %14s\n" "$model" "$impl" "$tps" "$tfl" "$(awk -v m="$mfu" 'BEGIN{print 100*m}')" "$ratio"
  done
done
echo "(MFU: model FLOPs 6N+12LCT per token vs the bf16 matmul rate each implementation measured in this run)"
echo
[ $FAILED -eq 0 ] && echo "GPU CHECK PASSED" || echo "GPU CHECK FAILED"
exit $FAILED
