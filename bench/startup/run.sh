#!/usr/bin/env bash
# Start-up time and resident memory of `trident --version` and of a small plan, beside /bin/true
# and `python3 -c pass` measured in the same run (median of 20 each); argument: the build folder.
set -u
build=${1:-build}
trident=$build/src/cli/trident
[ -x "$trident" ] || { echo "build trident first (make build)"; exit 2; }
probe=$build/bench/startup/startup_probe
if [ ! -x "$probe" ]; then
  probe=$(mktemp -d)/startup_probe
  c++ -O2 "$(dirname "$0")/startup_probe.cpp" -o "$probe" || exit 1
fi
n=20
measure() { "$probe" "$n" "$@"; }
read -r t_ms t_mib < <(measure "$trident" --version) || exit 1
read -r p_ms p_mib < <(measure "$trident" plan --model gpt3-6.7b --nodes 2 --global-batch-size 64 --top 1) || exit 1
read -r true_ms true_mib < <(measure /bin/true) || exit 1
read -r py_ms py_mib < <(measure /usr/bin/python3 -c pass) || exit 1
echo "start-up, median of $n runs each (wall time, peak resident memory):"
printf "  %-34s %8.2f ms %7.1f MiB\n" "trident --version" "$t_ms" "$t_mib" "trident plan (gpt3-6.7b, 16 GPUs)" "$p_ms" \
  "$p_mib" "/bin/true" "$true_ms" "$true_mib" "python3 -c pass" "$py_ms" "$py_mib"
awk -v t="$t_ms" -v m="$t_mib" -v pt="$py_ms" -v pm="$py_mib" -v bt="$true_ms" 'BEGIN {
  printf "trident --version / python3 -c pass: %.2f x the time, %.2f x the memory; / /bin/true: %.1f x the time\n", t/pt, m/pm, t/bt
  printf "goal: trident --version under 20 ms and 30 MiB resident: %s\n", (t < 20 && m < 30) ? "met" : "NOT met" }'
