"""Every test that starts mpirun carries the ctest label `mpi` (scripts/sanitize.sh runs that group
with leak detection off: OpenMPI keeps memory to exit that LeakSanitizer cannot suppress).

usage: check_mpi_labels.py CTEST MPIEXEC   (run in the build folder)

Lists the suite (ctest --show-only=json-v1) and flags each test without the label that starts
mpirun: its command holds MPIEXEC (a binary under mpirun, or a script given it), or a script of
its command runs "mpirun" / "mpiexec" as a program. Tests reaching mpirun through `trident
rehearse` or `train --elastic` are labelled by their folder (tests/parallel labels all its
add_test tests). Prints each one and exits 1; exits 0 when there is none."""
import json
import os
import re
import subprocess
import sys

RUNS_MPIRUN = re.compile(r"""["'](mpirun|mpiexec)["']""")


def starts_mpirun(command, mpiexec):
    if any(mpiexec and mpiexec in arg for arg in command):
        return True
    for arg in command:
        if arg.endswith((".py", ".sh")) and os.path.isfile(arg):
            with open(arg, errors="replace") as f:
                if RUNS_MPIRUN.search(f.read()):
                    return True
    return False


def main(ctest, mpiexec):
    out = subprocess.run([ctest, "--show-only=json-v1"], capture_output=True, text=True, check=True).stdout
    tests = json.loads(out)["tests"]
    bad, multi = [], 0
    for t in tests:
        if any(arg.endswith(os.path.basename(__file__)) for arg in t.get("command", [])):
            continue  # this check is given MPIEXEC, and starts nothing
        labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
        if starts_mpirun(t.get("command", []), mpiexec):
            multi += 1
            if "mpi" not in labels:
                bad.append(f"{t['name']}: starts mpirun but has no LABELS mpi (add it where the test is added)")
    for b in bad:
        print(b)
    print(f"{len(tests)} tests, {multi} start mpirun, {len(bad)} without the label mpi")
    return 1 if bad or not tests else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
