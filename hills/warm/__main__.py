"""`python -m hills.warm serve PATH MODULE...` (what a client starts), and
`list` or `stop [--all | SERVER...]` (docs/warm.md; `hills warm` is the
user's command for these)."""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) >= 2:
        from . import server

        return server.serve(argv[1], argv[2:])
    from . import control

    code = control.main(argv)
    if code >= 0:
        return code
    print("usage: python -m hills.warm list | stop [--all | SERVER...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    from ..base.errors import leave_now
    from .common import flush

    code = main(sys.argv[1:])
    flush()
    leave_now(code)
