#!/usr/bin/python3
"""Reference word count, independent of the C plugin, for the tests.

    /usr/bin/python3 tests/wordcount_ref.py -o OUT [--delimiters F] INPUT...

Same definition as the wordcount job:
- inputs are taken in the order given; a file as is, a directory walked
  recursively (symbolic links followed, a directory already seen in the
  walk of that input skipped by (st_dev, st_ino), entries that are neither
  regular files nor directories or that cannot be stat'ed left out), the
  files under one input in byte order of their full paths;
- a word is a maximal run of bytes in [A-Za-z0-9] or 0x80-0xFF; with
  --delimiters, the separators are exactly the bytes of that file and
  every other byte is a word byte; A-Z are lowered, nothing else changes;
  a word never spans two files;
- output: "word<TAB>count\\n" by count descending, then word bytes
  ascending (a prefix first).
"""
import argparse
import os
import re
import stat
import sys
from collections import Counter

DEFAULT_WORD = re.compile(rb"[A-Za-z0-9\x80-\xff]+")
LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                        b"abcdefghijklmnopqrstuvwxyz")


def walk(path, seen, top):
    """The regular files at PATH (bytes), in walk order."""
    try:
        st = os.stat(path)
    except OSError:
        if top:
            raise
        return []
    if stat.S_ISREG(st.st_mode):
        return [path]
    if stat.S_ISDIR(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return []
        seen.add(key)
        out = []
        prefix = path if path == b"/" else path + b"/"
        for name in sorted(os.listdir(path)):
            out.extend(walk(prefix + name, seen, False))
        return out
    if top:
        raise SystemExit(f"{path!r}: not a regular file or a directory")
    return []


def input_files(inputs):
    files = []
    for p in inputs:
        p = os.fsencode(p)
        while len(p) > 1 and p.endswith(b"/"):
            p = p[:-1]
        files.extend(sorted(walk(p, set(), True)))
    return files


def word_regex(delimiters):
    if delimiters is None:
        return DEFAULT_WORD
    with open(delimiters, "rb") as f:
        seps = set(f.read())
    word = [b for b in range(256) if b not in seps]
    if not word:
        return None
    cls = b"".join(re.escape(bytes([b])) for b in word)
    return re.compile(b"[" + cls + b"]+")


def count(files, regex):
    counts = Counter()
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        if regex is None:
            continue
        counts.update(m.translate(LOWER) for m in regex.findall(data))
    return counts


def write(counts, out):
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    with open(out, "wb") as f:
        for w, c in items:
            f.write(w + b"\t" + str(c).encode() + b"\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--delimiters")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    counts = count(input_files(a.inputs), word_regex(a.delimiters))
    write(counts, a.output)
    print(f"{len(counts)} distinct, {sum(counts.values())} words",
          file=sys.stderr)


if __name__ == "__main__":
    main()
