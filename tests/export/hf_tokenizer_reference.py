"""A byte-level BPE written here from its public definition (GPT-2's encoder.py, Hugging Face's
tokenizers: added tokens cut out first, leftmost-longest; the Split regex, Isolated; GPT-2's
bytes_to_unicode; the lowest-ranked merge until none applies; ignore_merges), a trainer for its
merges, and a writer of the tokenizer.json Hugging Face reads. Python's `regex` module gives the
\\p{L} / \\p{N} classes (Debian's python3-regex)."""
import glob
import json
import os
import struct
from collections import Counter

import regex

# Llama 3's split pattern (its tokenizer.json's pre_tokenizer Split) and GPT-2's (ByteLevel use_regex).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE = bytes_to_unicode()


def isolated(pattern, text):
    """Hugging Face's Split, behavior Isolated: every match and every gap between matches."""
    out, last = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() == m.end():
            continue
        if m.start() > last:
            out.append(text[last:m.start()])
        out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def byte_chars(piece):
    return "".join(BYTE[b] for b in piece.encode("utf-8"))


def train(text, pattern, merges):
    """`merges` merges of the most frequent pair (ties: the smallest pair), over the byte-level words."""
    words = Counter(tuple(byte_chars(p)) for p in isolated(pattern, text))
    out = []
    for _ in range(merges):
        pairs = Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        out.append(best)
        merged = Counter()
        for w, n in words.items():
            i, nw = 0, []
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    nw.append(w[i] + w[i + 1])
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            merged[tuple(nw)] += n
        words = merged
    return out


class Tokenizer:
    def __init__(self, merges, added, pattern, byte_level_regex=False, ignore_merges=False):
        # Ids: the 256 byte characters in bytes_to_unicode's order, then each merge's token, then the added ones.
        self.vocab = {c: i for i, c in enumerate(BYTE.values())}
        for a, b in merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        self.added = {t: len(self.vocab) + i for i, t in enumerate(added)}
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.merges, self.pattern, self.byte_level_regex, self.ignore_merges = merges, pattern, byte_level_regex, ignore_merges

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        w = list(word)
        while len(w) > 1:  # GPT-2's encoder.py: the lowest-ranked pair, every occurrence, left to right
            pairs = set(zip(w, w[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            i, nw = 0, []
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    nw.append(w[i] + w[i + 1])
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            w = nw
        return [self.vocab[t] for t in w]

    def encode(self, text):
        ids = []
        spans = [text]
        if self.added:
            alt = "|".join(regex.escape(t) for t in sorted(self.added, key=len, reverse=True))
            spans = regex.split(f"({alt})", text)
        for k, span in enumerate(spans):
            if k % 2 == 1:
                ids.append(self.added[span])
                continue
            pieces = [span] if not span else isolated(self.pattern, span)
            for p in pieces:
                ids += self.bpe(byte_chars(p))
        return ids

    def json(self, **overrides):
        """tokenizer.json as Hugging Face's tokenizers writes it."""
        if self.byte_level_regex:  # GPT-2: ByteLevel splits with its own regex
            pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        else:  # Llama 3 / Qwen2: the Split regex, then ByteLevel without one
            pre = {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": self.pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
        d = {"version": "1.0", "truncation": None, "padding": None,
             "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                               "normalized": False, "special": True} for t, i in self.added.items()],
             "normalizer": None, "pre_tokenizer": pre,
             "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
             "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
             "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                       "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                       "ignore_merges": self.ignore_merges, "vocab": self.vocab,
                       "merges": [f"{a} {b}" for a, b in self.merges]}}
        d.update(overrides)
        return json.dumps(d, ensure_ascii=False, indent=2)


MIXED_TEXT = ("Hello, world! It's 2024-12-07; they'll pay $1234567.89 (or 3.14159%) -- DON'T   stop.\n\n"
              "Non-ASCII: café, naïve, Größe, Ελληνικά, 東京タワー, emoji 🙂🚀!\n"
              "  indented   spaces\tand\ttabs\r\nline\u00a0break<|endoftext|>Next doc: I'M here, we've 42 cats.\n"
              "<|pad|><|endoftext|>  trailing  \n\n\n")


def corpus(limit=40000):
    """Text for training merges: the fortunes the bundled corpus is (Debian's fortunes package)."""
    text = ""
    for f in sorted(glob.glob("/usr/share/games/fortunes/*.u8")) or sorted(glob.glob("/usr/share/games/fortunes/*")):
        if f.endswith(".dat") or os.path.isdir(f):
            continue
        text += open(f, encoding="utf-8", errors="replace").read()
        if len(text) > limit:
            break
    # Without the fortune files' "%" separator lines (data prepare makes them blank lines).
    return "\n".join("" if line == "%" else line for line in text[:limit].split("\n"))


def token_file_ids(path):
    """The ids of a Trident token file (64-byte header: count at 16, width at 24)."""
    raw = open(path, "rb").read()
    (count,) = struct.unpack("<Q", raw[16:24])
    (width,) = struct.unpack("<I", raw[24:28])
    return list(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", raw[64:64 + count * width]))
