"""`hills verify`: check report signatures. Kept free of click and YAML so
it starts about as fast as the interpreter."""

import sys

from . import signing, state
from .errors import HillsError

INVALID_TEXT = "this report was edited, or it was signed on another machine"
NO_KEY_HINT = ("a report verifies only with the key of the machine that signed it: run 'hills verify' there, "
               "or set HILLS_HOME to that machine's state")


def no_key_reason():
    """Why nothing verifies on a machine that has no key yet (and gets none)."""
    return f"no machine key to check it with ('{state.key_path()}' does not exist)"


def verdict(report, key):
    """(ok, reason) for one parsed report; `key` None means this machine has none."""
    if key is None:
        return False, no_key_reason()
    return signing.verify(report, key)


def check(paths, key=None):
    """[(path, ok, reason, report_or_None)] for each path."""
    key = key or state.existing_key()
    results = []
    for path in paths:
        try:
            report = signing.load_report(path)
        except HillsError as exc:
            results.append((path, False, exc.message, None))
            continue
        ok, reason = verdict(report, key)
        results.append((path, ok, reason, report))
    return results


def render(results, out=None, err=None):
    """Print one verdict per report; return the exit code: 1 if any is
    INVALID, 2 if any file could not be read as a report at all."""
    from .report import subject_line, summary_line

    # Looked up per call: a default bound at import would miss a redirected stdout.
    out = out or sys.stdout
    err = err or sys.stderr
    worst = 0
    no_key = False
    for path, ok, reason, report in results:
        label = f"  ({path})" if len(results) > 1 else ""
        if ok:
            out.write(f"signature valid: {subject_line(report)}{label}\n")
            if "metrics" in report:
                out.write(f"  {summary_line(report)}\n")
            tool = report.get("tool") or {}
            who = f"hills {tool.get('version')}" if tool.get("version") else "hills"
            trust = "" if report.get("official") else f"  [unofficial: {report.get('official_reason') or report.get('trust')}]"
            out.write(f"  signed {report.get('timestamp', '?')} by {who}{trust}\n")
        elif report is None:
            # Not a report (missing, not JSON): a usage error, not a verdict.
            worst = 2
            out.flush()
            err.write(f"error: {reason}\nhint: pass a report as 'hills eval -o FILE' writes it, "
                      "or '-' to read one on standard input\n")
        else:
            worst = max(worst, 1)
            if reason == "no signature":
                out.write(f"signature INVALID: the report carries no signature{label}\n")
            elif reason == no_key_reason():
                no_key = True
                out.write(f"signature INVALID: {reason}{label}\n")
            else:
                out.write(f"signature INVALID: {INVALID_TEXT}{label}\n")
    out.flush()
    if no_key:
        err.write(f"hint: {NO_KEY_HINT}\n")
    err.flush()
    return worst


def fast_main(paths):
    """Entry for `hills verify FILE...` without click; returns an exit code."""
    try:
        if not paths:
            sys.stderr.write("error: no report given\nhint: hills verify REPORT...\n")
            return 2
        return render(check(paths))
    except HillsError as exc:
        sys.stderr.write(f"error: {exc.message}\nhint: {exc.hint or 'see ' + repr('hills verify --help')}\n")
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the same funnel as the click commands: a bug is exit 3
        from .errors import missing_dependency

        # A missing dependency, or a folder or disk that refused a write: exit 4.
        problem = missing_dependency(exc) if isinstance(exc, ModuleNotFoundError) else state.write_problem(exc)
        if problem is not None:
            sys.stderr.write(f"error: {problem.message}\nhint: {problem.hint}\n")
            return problem.exit_code
        from .cli import _crash_log

        path = _crash_log(exc)
        sys.stderr.write(f"error: internal error in hills: {type(exc).__name__}\n"
                         + (f"hint: the traceback is saved in {path}; please report it\n" if path else ""))
        return 3
