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
    try:
        from .cli import main as cli_main
    except ModuleNotFoundError as exc:
        sys.exit(_missing(exc))
    cli_main()


def _missing(exc):
    """Exit code and message for a dependency this interpreter lacks; any
    other missing module is a broken install, which is re-raised."""
    from .errors import missing_dependency

    problem = missing_dependency(exc)
    if problem is None:
        raise exc
    sys.stderr.write(f"error: {problem.message}\nhint: {problem.hint}\n")
    return problem.exit_code


if __name__ == "__main__":
    main()
