#!/usr/bin/env bash
# The hill's evaluator (command shape). hills runs it in a copy of the
# submission, where ./problem is this hill, with HILLS_SPLIT saying which
# instances to use: data/validation/, or private/holdout/ for --final.
set -euo pipefail
case "${HILLS_SPLIT:-validation}" in
    holdout) source=problem/private/holdout ;;
    *)       source=problem/data/validation ;;
esac
# Only the inputs of this split reach the submission, as a copy.
rm -rf instances && mkdir instances && cp "$source"/*.json instances/
# pack() runs confined: no hill, no private/, its own folder writable only.
"$HILLS_PYTHON" -m hills.sdk "$HILLS_PYTHON" problem/run.py
rm -f "$HILLS_RESULT"              # only the scorer may score
exec "$HILLS_PYTHON" problem/score.py
