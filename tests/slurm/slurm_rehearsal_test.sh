#!/usr/bin/env bash
# A real Slurm on this machine: munged, slurmctld and slurmd from Debian's packages on localhost,
# configured in a temporary folder (own munge key, own ports, own state), then
# examples/slurm/rehearsal-cpu.sbatch submitted with sbatch; waits (bounded) for it, checks the
# rehearsal report it wrote, and shuts everything down. Needs root (slurmd starts the job's tasks).
set -u
trident=$1
root=$2
[ "$(id -u)" -eq 0 ] || { echo "FAIL: run as root (slurmd must start tasks as the submitting user)"; exit 1; }
for b in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v "$b" >/dev/null || { echo "FAIL: $b missing (scripts/install-deps.sh installs slurm-wlm and munge)"; exit 1; }
done
T=$(mktemp -d /tmp/trident-slurm.XXXXXX)
chmod 700 "$T"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/*.log "$T"/*.out "$T"/out/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge with its own key and socket.
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge.key"
munged --foreground --force --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munge.seed" >"$T/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || fail "munged did not start"

cpus=$(nproc)
mkdir -p "$T/state" "$T/spool" "$T/out"
cat >"$T/slurm.conf" <<CONF
ClusterName=tridentci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$T/slurm.conf" >"$T/slurmd.out" 2>&1 &
pids+=($!)
up=""
for _ in $(seq 150); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null)
  case "$state" in idle*|mix*|alloc*) up=1; break ;; esac
  sleep 0.2
done
[ -n "$up" ] || fail "the node did not come up (state '${state:-none}')"
echo "ok   slurm up: munged, slurmctld, slurmd on localhost ($cpus CPUs)"

job=$(cd "$T/out" && TRIDENT="$trident" OUT="$T/out" sbatch --parsable --chdir="$T/out" \
        --export=ALL,OMPI_MCA_btl_vader_single_copy_mechanism=none "$root/examples/slurm/rehearsal-cpu.sbatch") \
  || fail "sbatch refused the script"
echo "ok   submitted job $job"
done_state=""
for _ in $(seq 600); do  # at most 120 s
  st=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) done_state=$st; break ;; esac
  sleep 0.2
done
[ "$done_state" = "COMPLETED" ] || { scontrol cancel "$job" 2>/dev/null; fail "job $job ended as '${done_state:-still running after 120 s}'"; }
echo "ok   job $job completed"

report="$T/out/rehearsal.json"
[ -s "$report" ] || fail "no rehearsal report at $report"
/usr/bin/python3 - "$report" "$T/out/rehearsal.html" <<'PY' || fail "the report is not what two srun tasks give"
import json, sys
r = json.load(open(sys.argv[1]))
assert (r["layout"]["pp"], r["layout"]["dp"], r["layout"]["tp"]) == (2, 1, 1), r["layout"]
assert len(r["ranks"]) == 2, r["ranks"]
assert len(r["losses"]) == 4 and all(l == l and 0 < l < 20 for l in r["losses"]), r["losses"]
shares = r["measured"]["shares"]
assert abs(sum(shares.values()) - 1) < 0.05, shares
html = open(sys.argv[2]).read()
assert 'id="rehearsal"' in html
print("ok   report: 2 ranks, pp 2, 4 losses", [round(l, 3) for l in r["losses"]], "shares sum", round(sum(shares.values()), 3))
PY
echo "all ok"
