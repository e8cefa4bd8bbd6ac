#!/usr/bin/env bash
# The planning commands start light: neither the `trident` executable nor the Python module
# links (ldd) or loads (LD_DEBUG, at --version and during a plan) CUDA, NCCL, MPI, OpenMP or
# a BLAS; the runtime commands run from the runtime library next to the executable, and without
# it say which file is missing (exit 2) while the planning commands still run.
# usage: light_commands_test.sh TRIDENT PYTHON_MODULE RUNTIME_LIBRARY
set -u
trident=$1
module=$2
library=$3
heavy='libcublasLt|libcublas\.|libcudart|libnccl|libmpi|libopen-pal|libopenblas|libblas|libgomp'
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
ok() { echo "ok   $1"; }

for f in "$trident" "$module"; do
  if [ ! -f "$f" ]; then fail "$f does not exist"; continue; fi
  if ! ldd "$f" >"$tmp/ldd" 2>&1; then fail "ldd cannot read $f:"; sed 's/^/    /' "$tmp/ldd"; continue; fi
  linked=$(grep -E "$heavy" "$tmp/ldd")
  if [ -n "$linked" ]; then fail "$(basename "$f") links the runtime's libraries:"; echo "$linked" | sed 's/^/    /'
  else ok "$(basename "$f") links none of them"; fi
done
# Not vacuous: the runtime library is where they are.
if ldd "$library" | grep -qE 'libopenblas|libblas'; then ok "the runtime library links the BLAS"
else fail "the runtime library $library does not link a BLAS (or does not exist)"; fi

plan=(plan --model gpt3-6.7b --nodes 2 --global-batch-size 64 --top 1)
for args in "--version" "${plan[*]}"; do
  # shellcheck disable=SC2086
  LD_DEBUG=libs "$trident" $args >"$tmp/out" 2>"$tmp/libs"
  loaded=$(grep -E 'calling init: .*('"$heavy"')' "$tmp/libs")
  if [ -n "$loaded" ]; then fail "trident $args loads:"; echo "$loaded" | sed 's/^/    /'
  else ok "trident $args loads none of them"; fi
done

# The executable alone, without the library beside it.
cp "$trident" "$tmp/trident"
"$tmp/trident" train --steps 1 >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "$(basename "$library"), which is missing" "$tmp/out" && grep -q "fix:" "$tmp/out"; then
  ok "train without the runtime library: exit 2 naming it"
else fail "train without the runtime library: exit $rc:"; sed 's/^/    /' "$tmp/out"; fi
if "$tmp/trident" "${plan[@]}" >"$tmp/out" 2>&1; then ok "plan runs without the runtime library"
else fail "plan without the runtime library:"; sed 's/^/    /' "$tmp/out"; fi
if "$tmp/trident" --help 2>&1 | grep -qE '^ +train +train a GPT'; then ok "--help lists the runtime commands"
else fail "--help does not list train"; fi
if "$tmp/trident" trian 2>&1 | grep -q "did you mean 'train'"; then ok "a mistyped runtime command gets its suggestion"
else fail "trident trian: no suggestion of train"; "$tmp/trident" trian 2>&1 | sed 's/^/    /'; fi
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
exit $((fails > 0))
