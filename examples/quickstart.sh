#!/usr/bin/env bash
# The quickstart, end to end, in a temporary folder with its own machine
# state: create the circle-packing hill, check and freeze it, score the
# example submission, verify the report, show that an edited copy fails
# verification, and print the attempts log.
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/hills-quickstart.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HILLS_HOME="$work/machine-state"
cd "$work"
mkdir demo && cd demo && git init -q .

step() { printf '\n$ %s\n' "$*" >&2; "$@"; }

step hills new circle-packing -t circle-packing >/dev/null
step hills check circle-packing
step hills commit circle-packing -m "initial" >/dev/null
tree_hash=$(hills log circle-packing --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tree_hash"])')
echo "tree hash: $tree_hash"

cp -r .hills/circle-packing/examples/grid ./my-packing
step hills eval ./my-packing -H circle-packing -o report.json >/dev/null
step hills verify report.json

sed 's/"value": 2\.54[0-9]*/"value": 2.9/' report.json > tampered.json
if cmp -s report.json tampered.json; then
    echo "quickstart: could not edit the score in the report" >&2
    exit 1
fi
printf '\n$ hills verify tampered.json   # the score was edited by hand\n' >&2
if hills verify tampered.json; then
    echo "quickstart: an edited report verified as valid" >&2
    exit 1
fi

step hills attempts circle-packing
step hills log circle-packing
echo
echo "quickstart: ok (tree hash $tree_hash)"
