#!/usr/bin/env bash
# The benchmark of this pi-autoresearch session, written by
# `hills setup loop pi-autoresearch @HILL@` (hills @VERSION@).
#
# It scores the submission folder @SUBMISSION@ against the frozen evaluator of
# the hill @HILL@, which nothing in this session can edit, and prints the score
# as METRIC lines: first @METRIC@ (@BETTER@ is better; the value is the
# evaluator's own, never negated), then hills.passed and hills.official, 1 or 0.
#
# Exit 0: passed. Exit 1 with METRIC lines: scored, but it did not pass
# (hills.passed=0); discard it. No METRIC line and a non-zero exit: the eval
# gave no score (a crash, a refusal, an implausible result); its reason is on
# stderr. Every eval is in the hill's attempts log: `hills attempts @HILL@`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${HILLS:-hills}" eval @SUBMISSION_ARG@ -H @HILL_ARG@ --metric-lines
