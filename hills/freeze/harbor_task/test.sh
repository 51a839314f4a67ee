#!/bin/sh
# Harbor's verifier of a task that `hills export harbor` wrote: the frozen
# hill in this folder scores the agent's submission folder and
# hills_reward.py writes Harbor's reward file. A run that hills refused
# (not a score) writes none, so Harbor reports a verifier error.
set -eu
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
exec python3 "$here/hills_reward.py" --task "$here" "$@"
