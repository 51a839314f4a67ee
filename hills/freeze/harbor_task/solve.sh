#!/bin/sh
# Harbor's oracle: the hill's own example submission, the one its gate scored.
set -eu
mkdir -p '{submission}'
cp -R '{example}/.' '{submission}/'
