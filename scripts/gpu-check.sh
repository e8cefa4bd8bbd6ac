#!/usr/bin/env bash
# The GPU proof of the one model on the CUDA backend, in one call (under 9 minutes on one H200),
# on a machine with an NVIDIA GPU (H100/H200/A100) and PyTorch:
#   1. builds the CUDA backend and what the checks run (cmake, only the needed targets, this GPU's arch)
#   2. CPU-side CUDA unit tests (cuda_tests)
#   3. every op of the kernel interface, CudaKernels (fp32 and bf16 tensors) vs CpuKernels
#      (gpu_kernel_check), and the one trainer on the GPU (fp32, bf16) vs the CPU (gpu_engine_check)
#   4. the stage model (GptStage) on the GPU in fp32 and in bf16 mixed precision against PyTorch:
#      logits, loss, every gradient and 10 AdamW losses (tests/reference, llm.c-style per-tensor
#      tolerances for bf16)
#   5. the NCCL communicator on real GPU buffers (gpu_nccl_check, one rank per GPU)
#   6. several ranks on the one GPU through the MPI communicator (host-staged): TP/PP/DP layouts
#      of `trident train --device cuda` against one process, ZeRO-1 (fp32 and bf16) and a bf16
#      pp2 layout (bf16 pipeline messages)
#   7. training throughput and MFU of GPT-2 124M and 350M, Trident bf16 vs PyTorch eager and
#      torch.compile on the same GPU, MFU against the bf16 matmul rate measured in the same run
# Prints every figure and a summary (also written to $OUT/summary.txt); exit 0 only if every
# check passed.
#
# Usage (from the repository root):  bash scripts/gpu-check.sh [--quick] [--help]
#   --quick      skip torch.compile (saves its compile time)
#   env: OUT (logs, results.txt, summary.txt; default /tmp/trident-gpu-check), BUILD (default
#        build-gpu), STEPS (timed benchmark steps, default 10), PYTHON (a python with torch+CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --help|-h) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument '$arg' (use --quick or --help)" >&2; exit 2 ;;
  esac
done
OUT_DIR=${OUT:-/tmp/trident-gpu-check}
BUILD=${BUILD:-build-gpu}
STEPS=${STEPS:-10}
JOBS=$(nproc)
MODEL_DIR=$(mktemp -d)  # model-check dumps (weights, logits, gradients): kept out of OUT
trap 'rm -rf "$MODEL_DIR"' EXIT
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
finish() {
  section "summary"
  { for line in "${SUMMARY[@]}"; do echo "$line"; done; echo; cat "$OUT_DIR/table.txt" 2>/dev/null
    echo; [ $FAILED -eq 0 ] && echo "GPU CHECK PASSED" || echo "GPU CHECK FAILED"; } | tee "$OUT_DIR/summary.txt"
  exit $FAILED
}

section "machine"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  note "FAIL  no NVIDIA GPU visible (nvidia-smi -L): run this script on a GPU machine"; FAILED=1; finish
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | head -5
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
ARCH=${ARCH:-90}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3 python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
      PY=$p; break
    fi
  done
fi
# The model check needs only CPU PyTorch (the reference runs in fp32 on the CPU).
PY_REF=$PY
[ -z "$PY_REF" ] && /usr/bin/python3 -c "import torch" 2>/dev/null && PY_REF=/usr/bin/python3
if [ -n "$PY" ]; then
  "$PY" -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"
else
  note "FAIL  no python with torch and CUDA found (set PYTHON=...): PyTorch throughput comparison skipped"; FAILED=1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

section "build (sm_$ARCH, $JOBS jobs)"
TARGETS="cuda_tests gpu_kernel_check gpu_engine_check gpu_nccl_check reference_dump gpu_gpt_bench trident"
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_CUDA=ON -DTRIDENT_CUDA_ARCHS="$ARCH" \
     >"$OUT_DIR/cmake.log" 2>&1; then
  tail -30 "$OUT_DIR/cmake.log"; note "FAIL  cmake configure (see above)"; FAILED=1; finish
fi
if ! cmake --build "$BUILD" -j "$JOBS" --target $TARGETS >"$OUT_DIR/build.log" 2>&1; then
  grep -E "error|Error" -A3 "$OUT_DIR/build.log" | head -40; note "FAIL  build (see above)"; FAILED=1; finish
fi
note "PASS  build of $TARGETS"
BIN=$BUILD/tests/cuda
TRIDENT=$BUILD/src/cli/trident

section "CPU-side CUDA unit tests"
run_step "cuda_tests" 60 "$BIN/cuda_tests" --gtest_brief=1

section "kernels and the engine, GPU vs CPU"
run_step "gpu_kernel_check (every op, f32 and bf16 tensors, vs CpuKernels)" 180 "$BIN/gpu_kernel_check"
run_step "gpu_engine_check (the trainer on CudaKernels f32/bf16 vs CpuKernels)" 180 "$BIN/gpu_engine_check"

section "the stage model vs PyTorch (logits, loss, every gradient, 10 AdamW losses)"
if [ -n "$PY_REF" ]; then
  for prec in fp32 bf16; do
    run_step "GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/$prec" --device cuda --precision $prec
    # Qwen3-MoE's attention (head_dim 32 on hidden 64, QK-norm: the head_rmsnorm kernels) and its MoE.
    run_step "Qwen3-MoE GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/qwen3-$prec" --device cuda --precision $prec \
      --family llama --qwen3-moe
    # GPT-OSS's attention (a sliding window of 24 keys on alternate layers, sinks: the flash
    # kernels' window mask, sink merge and sink-gradient kernel).
    run_step "GPT-OSS attention GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/gpt-oss-$prec" --device cuda --precision $prec \
      --family llama --gpt-oss-attention
    # GPT-OSS's whole model (biases, the router's bias, the clamped unit: swiglu_oss kernels).
    run_step "GPT-OSS GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/gpt-oss-model-$prec" --device cuda --precision $prec \
      --family llama --gpt-oss
    # Llama 3.1's rope scaling (the rope kernel's rewritten frequencies).
    run_step "Llama 3.1 rope scaling GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/llama3-rope-$prec" --device cuda --precision $prec \
      --family llama --llama3-rope
    # DeepSeek-V3's router (sigmoid, expert bias, scaled weights; routed on the host) on the GPU's logits.
    run_step "DeepSeek-V3 router GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/deepseek-router-$prec" --device cuda --precision $prec \
      --family llama --qwen3-moe --deepseek-router
    # DeepSeek-V3's multi-token prediction (one MoE MTP layer) on the GPU: its logits, loss and gradients.
    run_step "DeepSeek-V3 MTP GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/mtp-$prec" --device cuda --precision $prec \
      --family llama --qwen3-moe --deepseek-router --mtp 1
    # DeepSeek-V3's multi-head latent attention (the copy_heads kernel, rope on the rope parts,
    # values zero-padded to the query/key head), a shared expert and a first dense layer.
    run_step "DeepSeek-V3 MLA GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/deepseek-v3-$prec" --device cuda --precision $prec \
      --family llama --deepseek-v3
    # YaRN: GPT-OSS's (the rope kernel's ramp and attention factor 1.347 on cos and sin) with its
    # windows and sinks, and DeepSeek-V3's (MLA's queries scaled by 1.874 through copy_heads).
    run_step "GPT-OSS yarn GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/gpt-oss-yarn-$prec" --device cuda --precision $prec \
      --family llama --gpt-oss-attention --yarn
    run_step "DeepSeek-V3 yarn GptStage on cuda in $prec vs PyTorch" 180 "$PY_REF" tests/reference/reference_test.py \
      "$BUILD/tests/reference/reference_dump" "$MODEL_DIR/deepseek-v3-yarn-$prec" --device cuda --precision $prec \
      --family llama --deepseek-v3 --yarn
  done
else
  note "FAIL  no python with torch: model check skipped"; FAILED=1
fi

section "NCCL communicator ($NGPU GPU(s), one rank per GPU)"
run_step "gpu_nccl_check ($NGPU rank(s))" 120 mpirun --oversubscribe -np "$NGPU" "$BIN/gpu_nccl_check"

section "several ranks on the one GPU (MPI communicator, host-staged) vs one process"
# Same seed, same data: every layout's losses must match the single-process run of the same
# precision (fp32 within 1e-4; bf16 within 1e-3: the same bf16 kernels, pipeline messages in bf16).
# ZeRO-1 shards the optimizer through device buffers; bf16 pp2 sends bf16 activations.
TRAIN="--layers 2 --hidden 128 --heads 2 --seq-len 64 --global-batch-size 8 --micro-batch-size 2 --steps 6 --log-every 1 --eval-every 0 --device cuda"
losses() { grep -oE 'loss [0-9.]+' "$1" | awk '{print $2}' | tr '\n' ' '; }
same() { "${PY_REF:-/usr/bin/python3}" -c "
import sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]; t=float(sys.argv[3])
sys.exit(0 if a and len(a)==len(b) and all(abs(x-y)<=t*max(1,abs(x)) for x,y in zip(a,b)) else 1)" "$1" "$2" "$3"; }
for prec in fp32 bf16; do
  if ! timeout 120 "$TRIDENT" train $TRAIN --precision $prec >"$OUT_DIR/ranks-1-$prec.log" 2>&1; then
    tail -5 "$OUT_DIR/ranks-1-$prec.log"; note "FAIL  trident train --device cuda --precision $prec (one process)"; FAILED=1
    continue
  fi
  ref=$(losses "$OUT_DIR/ranks-1-$prec.log")
  [ "$prec" = fp32 ] && { ref32=$ref; tol=1e-4; layouts=("--dp 2" "--dp 2 --zero 1" "--tp 2" "--pp 2" "--dp 2 --tp 2"); }
  [ "$prec" = bf16 ] && { tol=1e-3; layouts=("--pp 2" "--dp 2 --zero 1"); }
  echo "one process $prec: $ref"
  for layout in "${layouts[@]}"; do
    np=$(echo "$layout" | awk '{p=1; for (i=1;i<NF;i+=2) if ($i!="--zero") p*=$(i+1); print p}')
    log="$OUT_DIR/ranks-$prec$(echo "$layout" | tr -d ' -').log"
    timeout 180 mpirun --oversubscribe -np "$np" "$TRIDENT" train $TRAIN --precision $prec $layout --gpu-comm mpi-host >"$log" 2>&1
    rc=$?
    got=$(losses "$log")
    echo "$prec $layout ($np ranks): $got"
    if [ $rc -eq 0 ] && same "$ref" "$got" $tol; then
      note "PASS  $np ranks on one GPU ($prec $layout) match one process"
    else
      tail -5 "$log"; note "FAIL  $np ranks on one GPU ($prec $layout) vs one process (exit $rc)"; FAILED=1
    fi
  done
done
ref=${ref32:-}
if [ "$NGPU" -ge 2 ]; then
  np=$(( NGPU >= 4 ? 4 : 2 )); layout=$([ $np -eq 4 ] && echo "--dp 2 --tp 2" || echo "--tp 2")
  log="$OUT_DIR/nccl-$np.log"
  timeout 180 mpirun --oversubscribe -np "$np" "$TRIDENT" train $TRAIN $layout >"$log" 2>&1
  rc=$?
  got=$(losses "$log")
  echo "NCCL $layout ($np GPUs): $got"
  if [ $rc -eq 0 ] && [ -n "${ref:-}" ] && "${PY_REF:-/usr/bin/python3}" -c "
import sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]
sys.exit(0 if a and len(a)==len(b) and all(abs(x-y)<=1e-4*max(1,abs(x)) for x,y in zip(a,b)) else 1)" "$ref" "$got"; then
    note "PASS  NCCL $layout on $np GPUs matches one process"
  else
    tail -5 "$log"; note "FAIL  NCCL $layout on $np GPUs (exit $rc)"; FAILED=1
  fi
else
  note "SKIP  NCCL layouts: this machine has $NGPU GPU (needs 2 or more)"
fi

log="$OUT_DIR/bf16-train.log"
if timeout 120 "$TRIDENT" train $TRAIN --precision bf16 >"$log" 2>&1 && grep -q "^done:" "$log"; then
  note "PASS  trident train --device cuda --precision bf16 (one process): $(grep -oE 'loss [0-9.]+' "$log" | tail -1)"
else
  tail -5 "$log"; note "FAIL  trident train --device cuda --precision bf16"; FAILED=1
fi

section "throughput: Trident bf16 vs PyTorch (same GPU, same batch)"
: >"$OUT_DIR/results.txt"
for cfg in "gpt2-small 16 1024" "gpt2-medium 8 1024"; do
  set -- $cfg
  model=$1 B=$2 T=$3
  peak=""
  for att in matmul flash; do
    echo "--- $model B=$B T=$T: Trident (bf16, $att attention)"
    timeout 240 "$BIN/gpu_gpt_bench" "$model" "$B" "$T" "$STEPS" bf16 $att | tee "$OUT_DIR/trident-$att-$model.log"
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

{
  printf "%-12s %-14s %12s %10s %8s %10s %14s\n" model impl tokens/s TFLOP/s MFU "vs eager" "vs compile"
  for model in gpt2-small gpt2-medium; do
    eager=$(grep "impl=torch-eager model=$model " "$OUT_DIR/results.txt" | grep -o 'tokens_per_s=[0-9]*' | cut -d= -f2)
    comp=$(grep "impl=torch-compile model=$model " "$OUT_DIR/results.txt" | grep -o 'tokens_per_s=[0-9]*' | cut -d= -f2)
    grep "model=$model " "$OUT_DIR/results.txt" | while read -r line; do
      impl=$(echo "$line" | grep -o 'impl=[^ ]*' | cut -d= -f2)
      tps=$(echo "$line" | grep -o 'tokens_per_s=[0-9]*' | cut -d= -f2)
      tfl=$(echo "$line" | grep -o 'tflops=[0-9.]*' | head -1 | cut -d= -f2)
      mfu=$(echo "$line" | grep -o ' mfu=[0-9.]*' | cut -d= -f2)
      r1=$([ -n "$eager" ] && awk -v a="$tps" -v b="$eager" 'BEGIN{printf "%.2fx", a/b}' || echo "-")
      r2=$([ -n "$comp" ] && awk -v a="$tps" -v b="$comp" 'BEGIN{printf "%.2fx", a/b}' || echo "-")
      printf "%-12s %-14s %12s %10s %7.1f%% %10s %14s\n" "$model" "$impl" "$tps" "$tfl" \
        "$(awk -v m="$mfu" 'BEGIN{print 100*m}')" "$r1" "$r2"
    done
  done
  echo "(MFU: model FLOPs 6N+12LCT per token vs the bf16 matmul rate each implementation measured in this run)"
} >"$OUT_DIR/table.txt"
finish
