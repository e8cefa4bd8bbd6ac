"""Every #include of src/ and python/ follows the layer rules (docs/architecture.md): a folder
includes only itself and the folders below it; and the planning-side libraries (trident_plan,
trident_sim, trident_report, trident_rehearse) are linked in a folder's CMakeLists.txt only where
the same rules let it include them. Prints each include or link that goes elsewhere (file, line,
the folder it reaches) and exits 1; exits 0 when there is none."""
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
    # The trainer: no planner, report or rehearsal (its caller, train_app, hands it what it needs).
    "runtime/parallel": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn", "runtime/data",
                                        "runtime/engine", "runtime/checkpoint", "runtime/cuda", "runtime/measure",
                                        "schedule", "launch"},
    "train_app": RUNTIME_BASE | {"runtime/comm", "runtime/kernels", "runtime/nn", "runtime/data", "runtime/engine",
                                 "runtime/checkpoint", "runtime/cuda", "runtime/measure", "runtime/parallel",
                                 "plan", "schedule", "sim", "report", "rehearse", "launch"},
    "python": {"core", "capability", "plan", "sim", "report", "schedule", "cli"},
}
ALL = set(ALLOWED) | {"cli"}
ALLOWED["cli"] = ALL  # the commands sit on everything
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# The planning side's libraries, by the folder each is.
PLANNING_TARGETS = {"trident_plan": "plan", "trident_sim": "sim", "trident_report": "report",
                    "trident_rehearse": "rehearse"}
LINK = re.compile(r"target_link_libraries\s*\(([^)]*)\)", re.S)


def link_problems(root):
    """Each CMakeLists.txt of src/ that links a planning-side library its folder may not include."""
    bad = []
    src = os.path.join(root, "src")
    for d, _, names in os.walk(src):
        if "CMakeLists.txt" not in names:
            continue
        here = os.path.relpath(d, src).replace(os.sep, "/")
        if here not in ALLOWED:
            continue
        path = os.path.join(d, "CMakeLists.txt")
        text = open(path, errors="replace").read()
        for m in LINK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for target in re.findall(r"\btrident_[a-z_]+\b", m.group(1)):
                there = PLANNING_TARGETS.get(target)
                if there and there != here and there not in ALLOWED[here]:
                    bad.append(f"src/{here}/CMakeLists.txt:{line}: {here} links {target} ({there} is not below it)")
    return bad


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
    links = link_problems(root)
    bad += links
    for b in bad:
        print(b)
    print(f"{files} files checked, {len(bad) - len(links)} includes and {len(links)} links against the layer rules")
    return 1 if bad or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
