"""Build the hill's corpus, once, when `hills new` creates the hill: the
Python sources of the standard library of the interpreter running `hills
new`, byte-level, split by file into train (data/train.bin, public),
validation and holdout (private/). The locks freeze the result at the
first commit; this script is kept for the record and is not run again.

The order is the library's: every `*.py` file under the library folder,
test folders and site-packages left out, in sorted order of its relative
path. Taken in the order of a hash of a salt and their relative paths,
files go to validation until it holds SPLIT_BYTES, then to holdout the
same way (each split is cut there), and the rest to train. The salt is drawn from fresh randomness (os.urandom) and kept nowhere:
the library is public (the training script can read it), but which of
its files this hill holds out is known to no one, so a script cannot
train on exactly the held-out ones. Each file is preceded by a NUL byte,
which marks where one ends and the next begins (so every split starts
with one)."""

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


def splits(root, files, salt):
    """{relative path: 'validation', 'holdout' or 'train'} for `salt`."""
    found, filled = {}, {"validation": 0, "holdout": 0}
    for rel in sorted(files, key=lambda rel: hashlib.sha256(salt + rel.encode("utf-8")).digest()):
        split = next((name for name in ("validation", "holdout") if filled[name] < SPLIT_BYTES), "train")
        found[rel] = split
        if split != "train":
            filled[split] += len(SEPARATOR) + os.path.getsize(os.path.join(root, rel))
    return found


def build(root, hill_dir, salt=None):
    salt = os.urandom(32) if salt is None else salt
    parts = {"train": [], "validation": [], "holdout": []}
    counts = {split: 0 for split in parts}
    files = library_files(root)
    split_of = splits(root, files, salt)
    for rel in files:
        split = split_of[rel]
        with open(os.path.join(root, rel), "rb") as handle:
            parts[split].append(handle.read())
        counts[split] += 1
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
