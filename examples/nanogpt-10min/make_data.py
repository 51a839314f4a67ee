"""Build the hill's corpus, once, when `hills new` creates the hill: the
Python sources of the standard library of the interpreter running `hills
new`, byte-level, split by file into train (data/train.bin, public),
validation and holdout (private/). The locks freeze the result at the
first commit; this script is kept for the record and is not run again.

Order and split are deterministic for a given library: every `*.py` file
under the library folder, test folders and site-packages left out, in
sorted order of its relative path; a file goes to validation or holdout
when a hash of its relative path says so, and those two splits are cut at
SPLIT_BYTES. Each file is preceded by a NUL byte, which marks where one
ends and the next begins (so every split starts with one)."""

import hashlib
import json
import os
import sys
import sysconfig

SKIPPED = {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idlelib", "lib2to3"}
SPLIT_BYTES = 256 * 1024
SEPARATOR = b"\0"


def library_files(root):
    """Relative paths of the library's sources, in the order the corpus holds them."""
    found = []
    for current, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if name not in SKIPPED]
        for name in files:
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(current, name), root).replace(os.sep, "/"))
    return sorted(found)


def split_of(rel):
    """'validation', 'holdout' or 'train', from a hash of the path alone."""
    bucket = int.from_bytes(hashlib.sha256(rel.encode("utf-8")).digest()[:4], "big") % 20
    return {0: "validation", 1: "holdout"}.get(bucket, "train")


def build(root, hill_dir):
    parts = {"train": [], "validation": [], "holdout": []}
    counts = {split: 0 for split in parts}
    for rel in library_files(root):
        with open(os.path.join(root, rel), "rb") as handle:
            parts[split_of(rel)].append(handle.read())
        counts[split_of(rel)] += 1
    data = {split: b"".join(SEPARATOR + chunk for chunk in chunks) for split, chunks in parts.items()}
    for split in ("validation", "holdout"):
        data[split] = data[split][:SPLIT_BYTES]
    os.makedirs(os.path.join(hill_dir, "data"), exist_ok=True)
    os.makedirs(os.path.join(hill_dir, "private"), exist_ok=True)
    targets = {"train": "data/train.bin", "validation": "private/validation.bin", "holdout": "private/holdout.bin"}
    for split, rel in targets.items():
        with open(os.path.join(hill_dir, rel), "wb") as handle:
            handle.write(data[split])
    record = {
        "source": "the standard library sources of Python " + sys.version.split()[0],
        "vocab_size": 256,
        "splits": {split: {"path": targets[split], "files": counts[split], "bytes": len(data[split])}
                   for split in targets},
    }
    with open(os.path.join(hill_dir, "data", "corpus.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")
    return record


if __name__ == "__main__":
    made = build(sysconfig.get_paths()["stdlib"], sys.argv[1] if len(sys.argv) > 1 else ".")
    print(json.dumps(made["splits"]), file=sys.stderr)
