#!/usr/bin/env python3
"""Tokenizing ~1 MB of generated Korean / Japanese / Arabic / English lines with the XLM-R-form
Unigram fixture (tests/model/fixtures/tok_xlmr): `headsep tokenize` (one process, reading the file,
writing JSON lines) against Hugging Face `tokenizers` (encode per line, in this process), best of
three each, and the ids compared (headsep truncates at the fixture's 64 positions; both cut alike).

    /work/.venv-torch/bin/python bench/unigram_tokenize_peer.py build/headsep
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/model/fixtures"))
import make_unigram_fixtures as m  # noqa: E402  (the corpus's word lists)
from tokenizers import Tokenizer  # noqa: E402

FOLDER = os.path.join(ROOT, "tests/model/fixtures/tok_xlmr")


def main():
    headsep = sys.argv[1]
    rng = random.Random(7)
    lines, size = [], 0
    while size < 1_000_000:
        words = rng.choice((m.EN, m.KO, m.JA, m.AR))
        line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 15)))
        lines.append(line)
        size += len(line.encode()) + 1
    tok = Tokenizer.from_file(os.path.join(FOLDER, "tokenizer.json"))
    tok.no_truncation()
    best_hf = min(timed(lambda: [tok.encode(l).ids for l in lines]) for _ in range(3))
    want = [tok.encode(l).ids[1:-1][:62] for l in lines]
    with tempfile.TemporaryDirectory() as tmp:
        text, out = os.path.join(tmp, "t.txt"), os.path.join(tmp, "o.jsonl")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [headsep, "tokenize", "--model", FOLDER, "--format", "lines", text, "-o", out]
        best_hs = min(timed(lambda: subprocess.run(cmd, check=True)) for _ in range(3))
        got = [json.loads(l)["ids"][1:-1] for l in open(out, encoding="utf-8")]
    print(f"{size} bytes, {len(lines)} lines: headsep tokenize {best_hs:.3f} s, tokenizers {best_hf:.3f} s; "
          f"ids equal: {got == want}")


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
