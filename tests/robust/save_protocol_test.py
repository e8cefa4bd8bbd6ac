#!/usr/bin/env python3
"""The checkpoint save owns only the names it made: a user's DIR.saving (folder or file, no
marker) is refused before any work and kept; --resume DIR.saving --checkpoint DIR is refused
(the first save would clear it); --metrics / --report inside the --checkpoint folder are refused
(each save swaps the folder away); a save stopped by a full disk (a file-size limit) leaves no
partial DIR.saving; saves during the run go on in the background, each completed before the
next, and one stopped by a full disk is reported with the previous checkpoint kept; an export
stopped by one leaves no half-written OUT.
usage: save_protocol_test.py TRIDENT"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

from robust_cases import TINY, check, finish, refused, run, train


def limited(trident, kib, *args):
    """Runs trident with files limited to `kib` KiB: a write past it fails (EFBIG), as on a full disk."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, kib * 1024))
    r = subprocess.run([trident] + list(args), capture_output=True, text=True, preexec_fn=limit, timeout=300)
    return r.returncode, r.stdout + r.stderr


def main():
    trident = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-save-")
    p = lambda name: os.path.join(d, name)
    # A user's folder and a user's file under the temporary name.
    os.makedirs(p("notes.saving"))
    with open(p("notes.saving/keep.txt"), "w") as f:
        f.write("mine\n")
    with open(p("memo.saving"), "w") as f:
        f.write("mine\n")
    for name, keep in [("notes", "notes.saving/keep.txt"), ("memo", "memo.saving")]:
        refused("--checkpoint %s with a user's %s.saving" % (name, name),
                run(trident, "train", *TINY, "--steps", "2", "--checkpoint", p(name)), "%s.saving" % name, "marker")
        check("the user's %s is kept" % keep, os.path.isfile(p(keep)) and open(p(keep)).read() == "mine\n")
    # The input checkpoint under the temporary name of the output.
    train(trident, p("q.ckpt"))
    os.rename(p("q.ckpt"), p("q.ckpt.saving"))
    refused("--resume q.ckpt.saving --checkpoint q.ckpt",
            run(trident, "train", "--resume", p("q.ckpt.saving"), "--steps", "3", "--checkpoint", p("q.ckpt")),
            "--resume '%s'" % p("q.ckpt.saving"), "temporary folder")
    check("the resumed checkpoint is kept", os.path.isfile(p("q.ckpt.saving/manifest.json")))
    # Outputs inside the folder each save replaces.
    train(trident, p("r.ckpt"))
    for flag, name in [("--metrics", "m.jsonl"), ("--report", "r.json")]:
        refused("%s inside --checkpoint" % flag,
                run(trident, "train", "--resume", p("r.ckpt"), "--steps", "3", "--checkpoint", p("r.ckpt"), flag,
                    p("r.ckpt/" + name)), flag, "replaces whole")
    # A full disk mid-save: the shard write fails; no partial folder stays.
    rc, out = limited(trident, 16, "train", "--layers", "1", "--hidden", "64", "--heads", "2", "--seq-len", "32",
                      "--threads", "1", "--steps", "2", "--checkpoint", p("full.ckpt"))
    check("a save on a full disk fails with exit 2", rc == 2 and "full.ckpt.saving" in out, out[-800:])
    check("a save on a full disk leaves no partial full.ckpt.saving", not os.path.lexists(p("full.ckpt.saving")))
    # Saves during the run go on in the background (the run waits until the state is written), each
    # completed before the next; the last the run waits for whole.
    small = ["--layers", "1", "--hidden", "64", "--heads", "2", "--seq-len", "32", "--threads", "1"]
    rc, out = run(trident, "train", *small, "--steps", "4", "--checkpoint-every", "1", "--checkpoint", p("bg.ckpt"))
    check("saves in the background: each taken, then durable and in place before the next",
          rc == 0 and all(("(step %d) state taken in" % k) in out and
                          ("in place (the save of step %d, written in the background: durable" % k) in out for k in (1, 2, 3))
          and "(step 4) saved in" in out, out[-1500:])
    check("the last save is in place, no bg.ckpt.saving left",
          '"step": 4' in open(p("bg.ckpt/manifest.json")).read() and not os.path.lexists(p("bg.ckpt.saving")))
    # A background save stopped by a full disk: reported (exit 2), the previous checkpoint kept.
    rc, out = run(trident, "train", *small, "--steps", "2", "--checkpoint", p("keep.ckpt"))
    check("a checkpoint to keep", rc == 0, out[-800:])
    rc, out = limited(trident, 16, "train", "--resume", p("keep.ckpt"), "--steps", "4", "--checkpoint-every", "1",
                      "--checkpoint", p("keep.ckpt"))
    check("a background save on a full disk fails with exit 2 naming the shard",
          rc == 2 and "(step 3) state taken" in out and "shard-00000.bin" in out, out[-800:])
    check("the previous checkpoint is kept, no partial keep.ckpt.saving",
          '"step": 2' in open(p("keep.ckpt/manifest.json")).read() and not os.path.lexists(p("keep.ckpt.saving")))
    # An export stopped half-way (the safetensors file over the limit) leaves no OUT.
    rc, out = limited(trident, 16, "export", "--checkpoint", p("r.ckpt"), p("hf"))
    check("an export on a full disk fails with exit 2", rc == 2, out[-800:])
    check("an export on a full disk leaves no half-written OUT",
          not os.path.lexists(p("hf")) and not any(f.startswith("hf.") for f in os.listdir(d)), str(os.listdir(d)))
    rc, out = run(trident, "export", "--checkpoint", p("r.ckpt"), p("hf"))
    check("the export then succeeds", rc == 0 and os.path.isfile(p("hf/model.safetensors")), out[-800:])
    shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
