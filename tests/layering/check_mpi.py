"""MPI is called only in src/runtime/comm (docs/architecture.md): everywhere else the run's
processes are a comm::World and its groups comm::Communicators. Prints each line of src/ outside
runtime/comm that includes <mpi.h> or an MPI header of runtime/comm (mpi_*.h), or names an MPI_
function, type or constant in code (comments and string literals, such as launcher environment
variables, are left out), and exits 1; exits 0 when there is none."""
import os
import re
import sys

ALLOWED = os.path.join("runtime", "comm")
MPI_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"](mpi\.h|runtime/comm/mpi_[a-z_]+\.h)[>"]')
MPI_NAME = re.compile(r"\bMPI_[A-Za-z_]+")
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def code_of(line, in_block):
    """The line without comments and string literals; in_block: inside /* ... */ at its start."""
    out, i = "", 0
    line = STRING.sub('""', line)
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return out, True
            i, in_block = end + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        else:
            out += line[i]
            i += 1
    return out, in_block


def main(root):
    src = os.path.join(root, "src")
    bad, files = [], 0
    for d, _, names in os.walk(src):
        rel_dir = os.path.relpath(d, src)
        if rel_dir == ALLOWED or rel_dir.startswith(ALLOWED + os.sep):
            continue
        for name in names:
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            files += 1
            path = os.path.join(d, name)
            rel = os.path.relpath(path, src)
            in_block = False
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if MPI_INCLUDE.match(line):
                        bad.append(f"src/{rel}:{n}: includes {MPI_INCLUDE.match(line).group(1)}")
                        continue
                    code, in_block = code_of(line, in_block)
                    for m in MPI_NAME.finditer(code):
                        bad.append(f"src/{rel}:{n}: calls MPI ({m.group(0)}): go through comm::World (runtime/comm/world.h)")
    for b in bad:
        print(b)
    print(f"{files} files outside src/runtime/comm checked, {len(bad)} uses of MPI")
    return 1 if bad or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
