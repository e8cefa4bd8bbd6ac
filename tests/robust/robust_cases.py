"""Helpers of the robustness tests that drive the `trident` binary: run a command, train a tiny
checkpoint, check that a case was refused with exit 2 naming what it must name."""
import os
import subprocess

TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "32", "--threads", "1"]
FAILURES = []


def run(trident, *args, cwd=None):
    r = subprocess.run([trident] + [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return r.returncode, r.stdout + r.stderr


def train(trident, ckpt, *extra, steps=2):
    """A tiny checkpoint at `ckpt`; `extra` flags replace TINY's of the same name."""
    given = set(extra[::2])
    base = [x for i in range(0, len(TINY), 2) if TINY[i] not in given for x in TINY[i:i + 2]]
    rc, out = run(trident, "train", *base, "--steps", steps, "--checkpoint", ckpt, *extra)
    assert rc == 0, "training the fixture checkpoint failed:\n" + out
    return ckpt


def refused(name, rc_out, *must_name):
    """A case passes when trident exits 2 and its message names every string in must_name."""
    rc, out = rc_out
    missing = [m for m in must_name if m not in out]
    if rc != 2 or missing:
        FAILURES.append(name)
        print("FAIL %s: exit %d (want 2)%s\n%s" % (name, rc, ", not named: %s" % missing if missing else "", out[-1500:]))
    else:
        print("ok   %s" % name)


def check(name, ok, detail=""):
    if not ok:
        FAILURES.append(name)
        print("FAIL %s %s" % (name, detail))
    else:
        print("ok   %s" % name)


def finish():
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0
