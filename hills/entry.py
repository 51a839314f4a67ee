"""Console-script entry: dispatch on the name this process was started as.
`hills verify` takes a path that imports neither click nor YAML."""

import os
import sys


def main():
    program = os.path.basename(sys.argv[0]) if sys.argv else "hills"
    args = sys.argv[1:]
    if program in ("hills", "git-hill") and args[:1] == ["verify"] and not {"-h", "--help"} & set(args) \
            and not any(a.startswith("-") and a != "-" for a in args[1:]):
        from .verify import fast_main

        sys.exit(fast_main(args[1:]))
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
