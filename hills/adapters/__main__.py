"""`python -m hills.adapters LOOP NAME`: print the binding file that points
LOOP (openevolve, shinka, gepa) at hill NAME, to save where the loop's
configuration names its evaluator (docs/adapters.md)."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from hills.adapters import gepa_eval, openevolve_eval, shinka_eval

BINDINGS: dict[str, Callable[[str], str]] = {
    "openevolve": openevolve_eval.binding_file,
    "shinka": shinka_eval.binding_file,
    "gepa": gepa_eval.binding_file,
}
USAGE = "usage: python -m hills.adapters {openevolve|shinka|gepa} NAME\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write(f"error: expected a loop and a hill name, got {len(args)} arguments\n" + USAGE)
        return 2
    if args[0] not in BINDINGS:
        sys.stderr.write(f"error: unknown loop '{args[0]}'\nhint: name one of {', '.join(BINDINGS)}\n")
        return 2
    sys.stdout.write(BINDINGS[args[0]](args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
