#!/usr/bin/env python3
"""CLI fuzz test: every subcommand of `trident`, every flag its --help lists, hostile values.

Each case starts from a small valid command line, replaces ONE flag (or positional) with a
hostile value (numbers at the edges, nan/inf, empty, garbage, directories, devices, symlinks,
the command's own input file, truncated or corrupt token files, tokenizers and checkpoints)
and runs it. A case fails when trident dies of a signal, runs past the time limit, exits with
a code other than 0/1/2, prints a raw library exception, prints a NaN or infinity where a plan or
a simulation succeeded, or changes any input file.

The flags are read from --help, so options added later are fuzzed too.
usage: cli_fuzz.py TRIDENT [--quick] [--only SUBCOMMAND] [--timeout S] [--jobs N]
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile

NUMBERS = ["0", "-1", "2147483648", "9223372036854775808", "1e400", "-1e400", "nan", "inf", "-inf", "1e-320",
           "", "garbage", "1 2", "0x10"]
# A number that is not one, as printf and fmt print it ("-nan", "inf"), outside words ("infeasible").
NOT_A_NUMBER = re.compile(r"(?<![A-Za-z])-?(nan|inf)(?![A-Za-z])", re.I)
# Text that a raw exception or a crash handler would print; trident's own messages never do.
RAW = re.compile(r"terminate called|what\(\):|std::bad_alloc|basic_string|stoi|stod|vector::|"
                 r"\[json\.exception|Assertion .* failed|AddressSanitizer|runtime error:|Segmentation")


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def write_token_file(path, tokens, vocab, version=1, width=2, kind=0, count=None):
    count = len(tokens) if count is None else count
    header = b"TRDTOKEN" + struct.pack("<IIQII", version, vocab, count, width, kind) + bytes(32)
    body = b"".join(struct.pack("<H" if width == 2 else "<I", t) for t in tokens)
    with open(path, "wb") as f:
        f.write(header + body)


class Fixtures:
    """Input files of the fuzz cases, in one scratch folder; their hashes are checked after each case."""

    def __init__(self, trident, root):
        self.root = root
        self.inputs = os.path.join(root, "in")
        os.makedirs(self.inputs)
        p = lambda name: os.path.join(self.inputs, name)
        text = ("the quick brown fox jumps over the lazy dog. " * 400).encode()
        with open(p("text.txt"), "wb") as f:
            f.write(text)
        self.text = p("text.txt")
        write_token_file(p("good.tok"), list(text[:4000]), 256)
        self.tok = p("good.tok")
        write_token_file(p("oob.tok"), [300] * 2000, 256)               # token ids beyond the vocabulary
        write_token_file(p("bigvocab.tok"), [5] * 2000, 4000000000, width=4)  # a vocabulary no model can have
        write_token_file(p("liar.tok"), [1] * 100, 256, count=1 << 61)  # header promises an absurd size
        write_token_file(p("badwidth.tok"), [1] * 100, 256, width=3)
        write_token_file(p("v99.tok"), [1] * 100, 256, version=99)
        with open(p("good.tok"), "rb") as f:
            good = f.read()
        with open(p("trunc.tok"), "wb") as f:
            f.write(good[: len(good) // 2])
        with open(p("flip.tok"), "wb") as f:
            f.write(good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])
        write_token_file(p("bpe.tok"), [1] * 4000, 300, kind=1)          # BPE without its tokenizer
        write_token_file(p("bpe_trunc.tok"), [1] * 4000, 300, kind=1)
        with open(p("bpe_trunc.tok.tokenizer"), "w") as f:
            f.write("trident-bpe")
        with open(p("garbage.bin"), "wb") as f:
            f.write(os.urandom(4096))
        with open(p("empty"), "wb"):
            pass
        with open(p("bad.toml"), "w") as f:
            f.write("[model\nlayers = = 3\n")
        with open(p("conflict.toml"), "w") as f:
            f.write("global_batch_size = 8\nglobal-batch-size = 16\n[training]\nglobal-batch-size = 32\n")
        with open(p("nan.toml"), "w") as f:
            f.write("[cluster]\ngpu-memory-gib = nan\nintra-gbytes-per-s = -inf\ngpus-per-node = 0\n")
        with open(p("huge.toml"), "w") as f:
            f.write("[layout]\ntp = 4611686018427387904\npp = 4\ndp = 4\n")
        # A real checkpoint, then damaged copies of it.
        self.ckpt = p("good.ckpt")
        subprocess.run([trident, "train", "--layers", "1", "--hidden", "16", "--heads", "1", "--seq-len", "16",
                        "--steps", "2", "--threads", "1", "--data", self.tok, "--checkpoint", self.ckpt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
        # A checkpoint is a folder (manifest + shards): one with a truncated shard, one with a
        # flipped byte, one with a garbage manifest.
        for name in ["trunc.ckpt", "flip.ckpt", "badmanifest.ckpt"]:
            shutil.copytree(self.ckpt, p(name))
        shard = sorted(f for f in os.listdir(self.ckpt) if f.endswith(".bin"))[0]
        with open(os.path.join(self.ckpt, shard), "rb") as f:
            ck = f.read()
        with open(os.path.join(p("trunc.ckpt"), shard), "wb") as f:
            f.write(ck[: len(ck) // 2])
        with open(os.path.join(p("flip.ckpt"), shard), "wb") as f:
            f.write(ck[:-20] + bytes([ck[-20] ^ 1]) + ck[-19:])
        with open(os.path.join(p("badmanifest.ckpt"), "manifest.json"), "w") as f:
            f.write('{"format": "trident-checkpoint", "version": 1, "meta": {"model": 7}, "files": [], "tensors": 3}')
        # Meta against tensors: a sequence length and a vocabulary the stored tensors do not have.
        for name, key, value in [("badseq.ckpt", "seq_len", 32), ("badvocab.ckpt", "vocab", 200)]:
            shutil.copytree(self.ckpt, p(name))
            with open(os.path.join(p(name), "manifest.json")) as f:
                m = json.load(f)
            m["meta"]["model"][key] = value
            with open(os.path.join(p(name), "manifest.json"), "w") as f:
                json.dump(m, f)
        os.symlink("good.tok", p("link-to-good.tok"))  # relative: the per-case copies keep them inside
        os.symlink("does-not-exist", p("dangling-link"))
        os.makedirs(p("a-directory"))
        # Devices of our own: a regression that renames over its output must never replace the
        # machine's /dev/null (as root it could). Without root, a FIFO stands in for each.
        self.devices = {}
        for name, minor in [("null", 3), ("zero", 5), ("full", 7)]:
            try:
                os.mknod(p("dev-" + name), 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            except OSError:
                os.mkfifo(p("dev-" + name))
            self.devices[p("dev-" + name)] = stat.S_IFMT(os.lstat(p("dev-" + name)).st_mode)
        self.hashes = {}
        for dirpath, _, files in os.walk(self.inputs):
            for name in files:
                path = os.path.join(dirpath, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    self.hashes[path] = sha(path)

    def changed(self, copy_root, may_change):
        """Input files of a case's copy that are gone, replaced or changed (but for may_change)."""
        bad = []
        for path, h in self.hashes.items():
            path = copy_root + path[len(self.root):]
            if path in may_change:
                continue
            if not os.path.exists(path) or os.path.islink(path) or not os.path.isfile(path) or sha(path) != h:
                bad.append(os.path.basename(path))
        for path, kind in self.devices.items():
            path = copy_root + path[len(self.root):]
            if not os.path.lexists(path) or stat.S_IFMT(os.lstat(path).st_mode) != kind:
                bad.append(os.path.basename(path) + " (a device)")
        for link in ["link-to-good.tok", "dangling-link"]:
            if not os.path.islink(os.path.join(copy_root, "in", link)):
                bad.append(link + " (a symlink)")
        return bad

    def paths(self, out_dir):
        p = lambda name: os.path.join(self.inputs, name)
        return {
            "dir": p("a-directory"), "/dev/null": p("dev-null"), "/dev/full": p("dev-full"), "/dev/zero": p("dev-zero"),
            "missing": p("no-such-file"), "missing-dir": p("no-such-dir/file"), "symlink": p("link-to-good.tok"),
            "dangling": p("dangling-link"), "token-file": self.tok, "text": self.text, "checkpoint": self.ckpt,
            "garbage": p("garbage.bin"), "empty": p("empty"), "trunc.tok": p("trunc.tok"), "flip.tok": p("flip.tok"),
            "oob.tok": p("oob.tok"), "bigvocab.tok": p("bigvocab.tok"), "liar.tok": p("liar.tok"),
            "badwidth.tok": p("badwidth.tok"), "v99.tok": p("v99.tok"), "bpe.tok": p("bpe.tok"),
            "bpe_trunc.tok": p("bpe_trunc.tok"), "trunc.ckpt": p("trunc.ckpt"), "flip.ckpt": p("flip.ckpt"),
            "badmanifest.ckpt": p("badmanifest.ckpt"), "badseq.ckpt": p("badseq.ckpt"),
            "badvocab.ckpt": p("badvocab.ckpt"), "checkpoint-file": os.path.join(self.ckpt, "manifest.json"),
            "bad.toml": p("bad.toml"), "conflict.toml": p("conflict.toml"), "nan.toml": p("nan.toml"),
            "huge.toml": p("huge.toml"), "self-dir": self.inputs,
        }


def flags_of(trident, sub):
    out = subprocess.run([trident] + sub + ["--help"], capture_output=True, text=True, timeout=30).stdout
    flags = []
    for m in re.finditer(r"^\s+(--[a-z][a-z0-9-]*)", out, re.M):
        if m.group(1) not in ("--help", "--version") and m.group(1) not in flags:
            flags.append(m.group(1))
    return flags


def base_commands(fx, out):
    tiny = ["--layers", "1", "--hidden", "16", "--heads", "1", "--seq-len", "16"]
    small_plan = ["--model", "gpt3-125m", "--cluster", "dgx-a100-80g", "--nodes", "1", "--global-batch-size", "16"]
    layout = ["--tp", "1", "--pp", "2", "--dp", "4", "--micro-batch-size", "1"]
    return {
        ("plan",): small_plan + ["--top", "2"],
        ("lint",): small_plan + layout,
        ("topo",): small_plan + layout,
        ("simulate",): small_plan + layout + ["--svg", os.path.join(out, "s.svg"), "--trace", os.path.join(out, "t.json")],
        ("train",): tiny + ["--steps", "2", "--stop-at", "2", "--threads", "1", "--data", fx.tok,
                            "--metrics", os.path.join(out, "m.jsonl"), "--checkpoint", os.path.join(out, "c.ckpt")],
        ("generate",): ["--checkpoint", fx.ckpt, "--tokens", "4", "--threads", "1"],
        ("bench",): ["--out", os.path.join(out, "cluster.toml"), "--mpi-mib", "1"],
        ("export",): ["--checkpoint", fx.ckpt, "--format", "safetensors", os.path.join(out, "hf")],
    }


# Flags whose value is a path the command reads or writes: they get the path fixtures too.
PATH_FLAGS = {"--config", "--data", "--checkpoint", "--resume", "--metrics", "--report", "--svg", "--trace", "--out",
              "--prediction-cluster", "--cost", "--html", "--emit", "--logits"}
# Flags that ask for long work when given a huge but valid value; under the fuzz test they are
# given the hostile numbers anyway (a huge value must be refused up front, not run for hours).


def cases(trident, fx, out, quick):
    paths = fx.paths(out)
    for sub, base in base_commands(fx, out).items():
        for flag in flags_of(trident, list(sub)):
            values = list(NUMBERS)
            if flag in PATH_FLAGS or flag == "--prompt":
                values += list(paths.values())
            if quick:
                values = values[::3]
            for v in values:
                args = []
                i = 0
                while i < len(base):  # the flag replaced, not repeated
                    if base[i] == flag:
                        i += 2
                        continue
                    args.append(base[i])
                    i += 1
                yield list(sub) + args + [flag, v]
    # data prepare TEXT OUT: every pair of path fixtures, plus its two options.
    for text in paths.values():
        for o in ["text", "token-file", "dir", "/dev/null", "/dev/full", "symlink", "missing-dir", "self-dir",
                  "checkpoint"]:
            yield ["data", "prepare", text, paths[o]]
        if quick:
            break
    for flag in ["--tokenizer", "--vocab"]:
        for v in NUMBERS + ["bpe", "bytes"]:
            yield ["data", "prepare", fx.text, os.path.join(out, "p.tok"), flag, v]
    # export --checkpoint CK OUT: OUT (a folder it fills) as every path fixture.
    for o in paths:
        yield ["export", "--checkpoint", fx.ckpt, paths[o]]
    # Resume with a model flag that contradicts the checkpoint (hidden 16, 1 head, seq 16, GPT, tied).
    resume = ["train", "--resume", fx.ckpt, "--steps", "4", "--threads", "1"]
    for flags in [["--seq-len", "32"], ["--vocab", "300"], ["--ffn-hidden", "32"], ["--family", "llama"],
                  ["--kv-heads", "2"], ["--no-tied-embeddings"], ["--hidden", "32"], ["--layers", "2"]]:
        yield resume + flags
    # Outputs of a resumed run inside the checkpoint folder it replaces.
    for flag in ["--metrics", "--report", "--html"]:
        yield resume + ["--checkpoint", fx.ckpt, flag, os.path.join(fx.ckpt, "x")]
    # Cost values at 0, just above 1 and far above it, on the commands that predict a step (a share
    # of 0 printed "Step -nan s" with exit 0); every cost flag their --help lists.
    for sub, base in base_commands(fx, out).items():
        if sub[0] not in ("plan", "lint", "simulate"):
            continue
        for flag in flags_of(trident, list(sub)):
            if flag.endswith(("-efficiency", "-factor", "-slowdown", "-us", "-mb", "-per-param", "-dim",
                              "-per-stored-byte", "-per-element")):
                for v in (["0", "1.5"] if quick else ["0", "1.0000001", "1.5", "1e300", "5e-324"]):
                    yield list(sub) + base + [flag, v]
    # --stage-layers extremes: counts near 2^62 that wrap around 64 bits to the model's layers,
    # the largest int64, negatives and empty items.
    q = 1 << 62
    for v in ["%d,%d,%d,%d" % (q, q, q, q + 1), "9223372036854775807,1", "-1,2", "0,1", ",", "1,,1",
              "99999999999999999999,1"]:
        yield ["train", "--layers", "1", "--hidden", "16", "--heads", "1", "--seq-len", "16", "--steps", "1",
               "--threads", "1", "--data", fx.tok, "--pp", "4" if v.count(",") == 3 else "2", "--stage-layers", v]
    # Config files of every kind on a planning command.
    for name in ["bad.toml", "conflict.toml", "nan.toml", "huge.toml", "dir", "/dev/zero", "garbage", "empty", "symlink"]:
        yield ["lint", "--config", paths[name]]


def copy_entry(src, dst):
    """copytree's copy: device nodes and FIFOs are made anew (reading /dev/zero would never end)."""
    mode = os.lstat(src).st_mode
    if stat.S_ISCHR(mode):
        os.mknod(dst, mode, os.lstat(src).st_rdev)
    elif stat.S_ISFIFO(mode):
        os.mkfifo(dst)
    else:
        shutil.copy2(src, dst)


def run_case(trident, args, fx, timeout, index):
    """Runs one case in its own copy of the fixtures, so a case that destroys a file is caught alone."""
    case_root = fx.root + "-case%d" % index
    shutil.copytree(fx.root, case_root, symlinks=True, copy_function=copy_entry)
    try:
        args = [case_root + x[len(fx.root):] if x.startswith(fx.root) else x for x in args]
        return check_case(trident, args, fx, timeout, case_root)
    finally:
        shutil.rmtree(case_root, ignore_errors=True)


OUTPUT_FLAGS = {"--metrics", "--checkpoint", "--report", "--svg", "--trace", "--out", "--html", "--emit", "--logits"}


def may_change(args):
    """The file a case names as its output may be replaced when it is a plain file that no other
    argument reads; everything else (inputs, symlink targets, files read by the same command) must stay."""
    at = None
    if args[:2] == ["data", "prepare"] and len(args) >= 4:
        at = 3
    elif len(args) >= 2 and args[-2] in OUTPUT_FLAGS and not (args[0] in ("generate", "export") and args[-2] == "--checkpoint"):
        at = len(args) - 1
    if at is None or os.path.islink(args[at]):
        return set()
    out = args[at]
    if os.path.isdir(out) and args[at - 1] == "--checkpoint" and args[0] == "train":
        # A checkpoint folder named as the output is replaced whole: that is what it is for.
        if any(os.path.exists(o) and os.path.realpath(o) == os.path.realpath(out) for o in args[:at - 1]):
            return set()
        return {os.path.join(d, f) for d, _, files in os.walk(out) for f in files}
    if not os.path.isfile(out):
        return set()
    others = args[:at] + args[at + 1:]
    if any(os.path.isdir(o) and os.path.realpath(out).startswith(os.path.realpath(o) + "/") for o in others):
        return set()  # a file inside a folder the command reads
    if any(os.path.exists(o) and os.path.realpath(o) == os.path.realpath(out) for o in others):
        return set()
    return {out}


def check_case(trident, args, fx, timeout, case_root):
    allowed = may_change(args)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        r = subprocess.run([trident] + args, capture_output=True, timeout=timeout, env=env, cwd=case_root,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        return "hang (over %ss)" % timeout
    changed = fx.changed(case_root, allowed)
    if changed:
        return "destroyed input file(s) " + ", ".join(changed)
    text = (r.stdout + r.stderr).decode(errors="replace")
    if r.returncode < 0:
        return "signal %s" % signal.Signals(-r.returncode).name
    if r.returncode not in (0, 1, 2):
        return "exit code %d: %s" % (r.returncode, text.strip().splitlines()[-1:] if text.strip() else "")
    # A prediction that succeeded prints only finite numbers ("Step -nan s" was a zero cost share).
    # (Not when an argument is itself "nan": a file of that name may be written and named.)
    if (r.returncode == 0 and args[0] in ("plan", "lint", "simulate", "topo") and NOT_A_NUMBER.search(text)
            and not any(NOT_A_NUMBER.search(a) for a in args)):
        line = next(l for l in text.splitlines() if NOT_A_NUMBER.search(l))
        return "printed a NaN or infinity with exit 0: " + line.strip()[:200]
    m = RAW.search(text)
    if m:
        line = next(l for l in text.splitlines() if m.group(0) in l)
        return "raw library text: " + line.strip()[:200]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trident")
    ap.add_argument("--quick", action="store_true", help="every third value only")
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    trident = os.path.abspath(a.trident)
    scratch = tempfile.mkdtemp(prefix="trident-cli-fuzz-")
    root = os.path.join(scratch, "fixtures")
    os.makedirs(root)
    try:
        fx = Fixtures(trident, root)
        out = os.path.join(root, "out")
        os.makedirs(out)
        all_cases = [c for c in cases(trident, fx, out, a.quick) if not a.only or c[0] == a.only]
        failures = []
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            results = pool.map(lambda ic: run_case(trident, ic[1], fx, a.timeout, ic[0]), enumerate(all_cases))
            for args, result in zip(all_cases, results):
                if result:
                    failures.append((args, result))
        print("cli fuzz: %d hostile inputs across %d subcommands, %d failures" %
              (len(all_cases), len({c[0] for c in all_cases}), len(failures)))
        for args, why in failures:
            print("  FAIL %s\n       trident %s" % (why, " ".join(repr(x) if x == "" or " " in x else x for x in args)))
        return 1 if failures else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
