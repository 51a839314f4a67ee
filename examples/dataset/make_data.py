"""Build the hill's splits, once, when `hills new` creates the hill: 1797
images of handwritten-looking digits, drawn here from fresh randomness
(os.urandom), so that no copy of them, and of their labels, exists
anywhere but in this hill.

Each image is made the way the optical recognition of handwritten digits
data set (E. Alpaydin and C. Kaynak, UCI) made its own: a digit drawn on
a 32x32 bitmap, cut into 4x4 blocks, each block's count of inked pixels
(0 to 16) one of the 64 features. The pen here is a program: every digit
is a few strokes (STROKES), and every image draws them with its own
slant, size, aspect, position, stroke width and wobble, plus some stray
ink. The rows are split into train (60%, with labels), validation and
holdout (20% each, labels in private/). The seed is not written down:
not even the hill's author can make these images again. The locks
freeze what this script wrote."""

import csv
import math
import os
import random
import sys

ROWS = 1797
FEATURES = 64
SIZE = 32  # the bitmap's side, in pixels
BLOCK = 4  # SIZE / BLOCK = 8 features a side


def _arc(cx, cy, rx, ry, start, end, steps=12):
    """Points of an elliptic arc, angles in turns (0 is east, 0.25 south)."""
    return [(cx + rx * math.cos(2 * math.pi * (start + (end - start) * i / steps)),
             cy + ry * math.sin(2 * math.pi * (start + (end - start) * i / steps))) for i in range(steps + 1)]


# Each digit as polylines in the unit square, x to the right, y down.
STROKES = {
    0: [_arc(0.5, 0.5, 0.28, 0.42, 0, 1, 20)],
    1: [[(0.35, 0.25), (0.55, 0.08), (0.55, 0.92)], [(0.38, 0.92), (0.72, 0.92)]],
    2: [_arc(0.5, 0.3, 0.27, 0.22, 0.55, 1.05, 10) + [(0.22, 0.9), (0.8, 0.9)]],
    3: [_arc(0.48, 0.29, 0.25, 0.2, 0.6, 1.25, 10), _arc(0.48, 0.69, 0.28, 0.22, 0.75, 1.4, 10)],
    4: [[(0.62, 0.92), (0.62, 0.08), (0.18, 0.65), (0.82, 0.65)]],
    5: [[(0.76, 0.1), (0.3, 0.1), (0.27, 0.45)] + _arc(0.48, 0.64, 0.28, 0.26, 0.62, 1.35, 12)],
    6: [[(0.7, 0.1), (0.4, 0.35)] + _arc(0.5, 0.66, 0.26, 0.25, 0.62, 1.62, 16)],
    7: [[(0.2, 0.1), (0.8, 0.1), (0.42, 0.92)], [(0.35, 0.52), (0.7, 0.52)]],
    8: [_arc(0.5, 0.28, 0.21, 0.19, 0, 1, 14), _arc(0.5, 0.7, 0.26, 0.22, 0, 1, 16)],
    9: [_arc(0.5, 0.33, 0.25, 0.24, 0, 1, 14), [(0.75, 0.33), (0.7, 0.62), (0.42, 0.92)]],
}


def _discs():
    """{radius in tenths of a pixel: the rows (dy, half width) of a pen that wide}."""
    found = {}
    for tenths in range(10, 41):
        radius = tenths / 10
        span = int(radius)
        found[tenths] = [(dy, int(math.sqrt(radius * radius - dy * dy))) for dy in range(-span, span + 1)]
    return found


DISCS = _discs()


def draw(digit, rng):
    """The 64 block counts of one image of `digit`, its look drawn from `rng`."""
    slant, turn = rng.uniform(-0.34, 0.12), rng.uniform(-0.12, 0.12)
    scale = rng.uniform(0.75, 1.0)
    aspect = rng.uniform(0.75, 1.2)
    shift_x, shift_y = rng.gauss(0, 0.06), rng.gauss(0, 0.045)
    cos_t, sin_t = math.cos(turn), math.sin(turn)
    pen = DISCS[rng.randint(12, 34)]
    wobble = rng.uniform(0, 0.045)
    canvas = bytearray(SIZE * SIZE)
    for stroke in STROKES[digit]:
        jitter = [(rng.gauss(0, wobble), rng.gauss(0, wobble)) for _ in stroke]
        points = []
        for (x, y), (jx, jy) in zip(stroke, jitter):
            x, y = (x - 0.5 + jx) * aspect * scale, (y - 0.5 + jy) * scale
            x += slant * y
            x, y = cos_t * x - sin_t * y, sin_t * x + cos_t * y
            points.append(((x + 0.5 + shift_x) * (SIZE - 1), (y + 0.5 + shift_y) * (SIZE - 1)))
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            steps = max(int(math.hypot(x1 - x0, y1 - y0)), 1)
            for step in range(steps + 1):
                x, y = round(x0 + (x1 - x0) * step / steps), round(y0 + (y1 - y0) * step / steps)
                for dy, half in pen:
                    row = y + dy
                    if 0 <= row < SIZE:
                        left, right = max(x - half, 0), min(x + half + 1, SIZE)
                        if left < right:
                            canvas[row * SIZE + left:row * SIZE + right] = b"\1" * (right - left)
    for _ in range(rng.randint(0, 6)):  # stray ink
        canvas[rng.randrange(SIZE * SIZE)] = 1
    side = SIZE // BLOCK
    features = []
    for block_row in range(side):
        for block_col in range(side):
            start = block_row * BLOCK * SIZE + block_col * BLOCK
            features.append(sum(sum(canvas[start + r * SIZE:start + r * SIZE + BLOCK]) for r in range(BLOCK)))
    return features


def write(path, header, table):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(table)


def build(hill_dir, rng=None):
    rng = rng or random.Random(os.urandom(32))
    labels = [index % 10 for index in range(ROWS)]
    rng.shuffle(labels)
    data = [draw(label, rng) + [label] for label in labels]
    cut_validation, cut_holdout = int(ROWS * 0.6), int(ROWS * 0.8)
    splits = {"train": data[:cut_validation], "validation": data[cut_validation:cut_holdout],
              "holdout": data[cut_holdout:]}
    pixels = [f"p{index}" for index in range(FEATURES)]
    write(os.path.join(hill_dir, "data", "train.csv"), pixels + ["label"], splits["train"])
    inputs = {"validation": os.path.join("data", "validation", "inputs.csv"),
              "holdout": os.path.join("private", "holdout", "inputs.csv")}
    for split, rel in inputs.items():
        ids = [f"{split[0]}{index:04d}" for index in range(len(splits[split]))]
        write(os.path.join(hill_dir, rel), ["id"] + pixels,
              [[row_id] + row[:FEATURES] for row_id, row in zip(ids, splits[split])])
        write(os.path.join(hill_dir, "private", "labels", f"{split}.csv"), ["id", "label"],
              [[row_id, row[FEATURES]] for row_id, row in zip(ids, splits[split])])
    return {split: len(rows) for split, rows in splits.items()}


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "."), file=sys.stderr)
