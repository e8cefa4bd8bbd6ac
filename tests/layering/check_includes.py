"""Every #include of src/ and python/ follows the layer rules (docs/architecture.md): a folder
includes only itself and the folders below it. Prints each include that goes elsewhere (file,
line, the folder it reaches) and exits 1; exits 0 when there is none."""
import os
import re
import sys

RUNTIME_BASE = {"core", "capability"}
# Folder -> the folders it may include (besides itself). Runtime folders are "runtime/NAME".
ALLOWED = {
    "core": set(),
    "launch": set(),
    "schedule": {"core"},
    "plan": {"core"},
    "capability": {"core", "schedule"},
    "sim": {"core", "schedule", "plan"},
    "report": {"core", "schedule", "capability", "plan", "sim"},
    "rehearse": {"core", "schedule", "capability", "plan", "sim", "report"},
    "runtime/comm": RUNTIME_BASE,
    "runtime/kernels": RUNTIME_BASE | {"runtime/comm"},
    "runtime/cuda": RUNTIME_BASE | {"runtime/comm", "runtime/kernels"},
    "runtime/nn": RUNTIME_BASE | {"runtime/comm", "runtime/kernels"},
    "runtime/data": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn"},
    "runtime/engine": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn", "runtime/data"},
    "runtime/checkpoint": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn", "runtime/data",
                                          "runtime/engine"},
    "runtime/measure": RUNTIME_BASE | {"runtime/comm", "runtime/kernels"},
    "runtime/parallel": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn", "runtime/data",
                                        "runtime/engine", "runtime/checkpoint", "runtime/cuda", "runtime/measure",
                                        "plan", "schedule", "sim", "report", "rehearse", "launch"},
    "python": {"core", "capability", "plan", "sim", "report", "schedule", "cli"},
}
ALL = set(ALLOWED) | {"cli"}
ALLOWED["cli"] = ALL  # the commands sit on everything
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """'runtime/nn/gpt.h' -> 'runtime/nn', 'report/x.h' -> 'report'."""
    parts = path.split("/")
    if parts[0] == "runtime" and len(parts) > 2:
        return "runtime/" + parts[1]
    return parts[0]


def main(root):
    bad, files = [], 0
    for top in ("src", "python"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(d, name)
                rel = os.path.relpath(path, os.path.join(root, "src")) if top == "src" else "python/" + name
                here = folder_of(rel)
                if here not in ALLOWED:
                    bad.append(f"{rel}: folder '{here}' has no row in the layer table of {__file__}")
                    continue
                files += 1
                with open(path, errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # a system or same-folder header
                        there = folder_of(m.group(1))
                        if there not in ALL or there == here or there in ALLOWED[here]:
                            continue
                        bad.append(f"{rel}:{n}: {here} includes {m.group(1)} ({there} is not below it)")
    for b in bad:
        print(b)
    print(f"{files} files checked, {len(bad)} includes against the layer rules")
    return 1 if bad or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
