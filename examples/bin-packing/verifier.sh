#!/usr/bin/env bash
# The hill's scoring phase (command shape). hills runs it in a folder that
# holds only what the solution phase wrote (packings.json), where ./problem
# is this hill, with HILLS_SPLIT saying which instances to check against:
# data/validation/, or private/holdout/ for --final. It runs no submitted
# code, so it uses the trusted interpreter.
set -euo pipefail
exec "$HILLS_SCORING_PYTHON" problem/score.py
