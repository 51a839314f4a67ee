#!/usr/bin/env bash
# The hill's evaluator (command shape). hills runs it in a copy of the
# submission, where ./problem is this hill, with HILLS_SPLIT saying which
# instances to use: data/validation/, or private/holdout/ for --final.
set -euo pipefail
"$HILLS_PYTHON" problem/run.py     # pack() on every instance -> packings.json
rm -f "$HILLS_RESULT"              # only the scorer may score
exec "$HILLS_PYTHON" problem/score.py
