"""A tokenizer.json (byte-level BPE: Llama 3's split pattern then ByteLevel, and GPT-2's ByteLevel
regex) written by the Python reference (hf_tokenizer_reference.py) with 300 merges it trained on
text: `trident data prepare --tokenizer tokenizer.json` gives exactly the reference's ids for a
mixed text (spaces, digits, punctuation, non-ASCII, tabs, CR LF, special tokens) and for the
training text; what would change the ids and is not read is refused by name."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import check, finish, run, tmp  # noqa: E402
import hf_tokenizer_reference as ref  # noqa: E402
from hf_tokenizer_reference import corpus, token_file_ids  # noqa: E402


def prepare(tokenizer, text, name):
    src, out = os.path.join(tmp, name + ".txt"), os.path.join(tmp, name + ".tokens")
    open(src, "w", encoding="utf-8", newline="").write(text)
    printed = run("data", "prepare", src, out, "--tokenizer", tokenizer).stdout
    return token_file_ids(out), printed


train_text = corpus()
merges = ref.train(train_text, ref.LLAMA3_PATTERN, 300)
check("the reference trained 300 merges", len(merges) == 300, len(merges))
for style, pattern, gpt2, ignore in (("llama3", ref.LLAMA3_PATTERN, False, True),
                                     ("gpt2", ref.GPT2_PATTERN, True, False)):
    tok = ref.Tokenizer(merges, ["<|endoftext|>", "<|pad|>"], pattern, byte_level_regex=gpt2, ignore_merges=ignore)
    path = os.path.join(tmp, style + "-tokenizer.json")
    open(path, "w", encoding="utf-8").write(tok.json())
    for what, text in (("the mixed text", ref.MIXED_TEXT), ("the training text", train_text)):
        want = tok.encode(text)
        got, printed = prepare(path, text, style + what[4:9])
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        check(f"{style}: {what} ({len(want)} ids) tokenizes to the reference's ids", got == want,
              f"first difference at {first}: trident {got[first:first + 8]} reference {want[first:first + 8]}; {printed}")
    check(f"{style}: merges shorten the text (the mixed text: {len(ref.MIXED_TEXT.encode())} bytes -> "
          f"{len(tok.encode(ref.MIXED_TEXT))} ids)", len(tok.encode(ref.MIXED_TEXT)) < 0.8 * len(ref.MIXED_TEXT.encode()))

# What changes the ids and is not read: refused by name, exit 2.
tok = ref.Tokenizer(merges, ["<|endoftext|>"], ref.LLAMA3_PATTERN)
src = os.path.join(tmp, "small.txt")
open(src, "w").write("hello world\n")
for what, overrides in (("normalizer 'NFC'", {"normalizer": {"type": "NFC"}}),
                        ("model type 'WordPiece'", {"model": {"type": "WordPiece", "vocab": {}}}),
                        ("pre_tokenizer Split behavior 'MergedWithPrevious'",
                         {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                             {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "MergedWithPrevious", "invert": False},
                             {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}}),
                        ("add_prefix_space true", {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}})):
    path = os.path.join(tmp, "refused-tokenizer.json")
    open(path, "w").write(tok.json(**overrides))
    p = run("data", "prepare", src, os.path.join(tmp, "refused.tokens"), "--tokenizer", path, want=2)
    check(f"refused naming {what}", what in p.stderr, p.stderr[-600:])
path = os.path.join(tmp, "ok-tokenizer.json")
open(path, "w").write(tok.json())
open(src, "wb").write(b"caf\xe9 latin-1\n")
p = run("data", "prepare", src, os.path.join(tmp, "latin1.tokens"), "--tokenizer", path, want=2)
check("text that is not UTF-8 is refused naming the byte", "not UTF-8 at byte 3" in p.stderr, p.stderr[-600:])

finish()
