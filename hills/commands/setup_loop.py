"""`hills setup loop LOOP NAME`: write into the current project the file
a text loop reads its score through (pi-autoresearch's measure script,
karpathy/autoresearch's program), calling `hills eval --metric-lines` or
`--colon-lines` on hill NAME. The loops are the table LOOPS; their files
are templates in hills/commands/loops/."""

from __future__ import annotations

import os
import shlex

import click

from ..base import errors
from ..base.records import frozen
from ..cli.options import CONTEXT
from ..cli.output import emit, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


@frozen
class Loop:
    """A loop hills writes a file for: its name on the command line, the
    project it comes from, the file it reads (relative to the project
    folder), that file's template, whether it is a script to run, and what
    to do once it is written."""

    name: str
    project: str
    path: str
    template: str
    executable: bool
    then: str


LOOPS: dict[str, Loop] = {loop.name: loop for loop in (
    Loop("autoresearch", "karpathy/autoresearch", "program.md", "autoresearch-program.md", False,
         "tell your agent to read program.md and start the experiments"),
    Loop("pi-autoresearch", "pi-autoresearch", ".auto/measure.sh", "pi-autoresearch-measure.sh", True,
         "start '/autoresearch' in pi and have it keep this .auto/measure.sh; the metric is '@METRIC@', "
         "@BETTER@ is better"),
)}


@frozen
class Written:
    """What `hills setup loop` makes: the file's path and its text."""

    path: str
    text: str
    mode: int
    then: str


def plan(loop: Loop, hill_name: str, submission: str, metric: Mapping[str, Any], version: str,
         template: str) -> Written:
    """The file `loop` reads for hill `hill_name` (as the user named it),
    scoring `submission`, whose primary metric is `metric`: `template` with
    its @KEYS@ filled in. Pure: no file is read or written."""
    from ..cli.metric_lines import line_name

    values = {
        "@HILL@": hill_name,
        "@HILL_ARG@": shlex.quote(hill_name),
        "@SUBMISSION@": submission,
        "@SUBMISSION_ARG@": shlex.quote(submission),
        "@METRIC@": line_name(str(metric["name"])),
        "@BETTER@": "lower" if metric.get("direction") == "min" else "higher",
        "@VERSION@": version,
    }
    text, then = template, loop.then
    for key, value in values.items():
        text, then = text.replace(key, value), then.replace(key, value)
    return Written(loop.path, text, 0o755 if loop.executable else 0o644, then)


def loop_named(name: str) -> Loop:
    found = LOOPS.get(name)
    if found is None:
        raise errors.UsageError(f"unknown loop '{name}'", hint="one of: " + ", ".join(sorted(LOOPS)))
    return found


def primary_metric(hill_name: str) -> dict[str, Any]:
    """The first metric hill.yaml of hill `hill_name` declares: the score the
    loop climbs."""
    from ..disk import hill
    from ..disk.manifest import ManifestError

    target = hill.resolve(hill_name)
    try:
        metrics = target.manifest().get("metrics") or []
    except ManifestError as exc:
        raise exc.refused(target.name) from None
    if not metrics:
        raise errors.Refused(f"hill '{target.name}' declares no metrics in hill.yaml: the loop's file names the "
                             "score it climbs", hint="add metrics: [{name, direction}] to hill.yaml and commit it")
    return dict(metrics[0])


def template_text(loop: Loop) -> str:
    import importlib.resources

    return importlib.resources.files(__package__).joinpath("loops", loop.template).read_text(encoding="utf-8")


def write_new(written: Written, force: bool) -> None:
    """Write the file whole or not at all, through a temporary file beside
    it; an existing file (or link) is replaced only with `force`, and the
    check is the link itself, which fails if the name was taken meanwhile."""
    from ..base import state

    path = written.path
    if os.path.lexists(path) and not force:
        raise _exists(path)
    folder = os.path.dirname(os.path.abspath(path))
    with state.named_os_errors(path):
        os.makedirs(folder, exist_ok=True)
        fd, temp = state.private_temp(folder, "." + os.path.basename(path) + ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(written.text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, written.mode)
            if force:
                os.replace(temp, path)
            else:
                _link_new(temp, path)
        except FileExistsError:
            raise _exists(path) from None
        finally:
            if os.path.lexists(temp):
                os.unlink(temp)


def _link_new(temp: str, path: str) -> None:
    """Give `temp` the name `path` unless that name is taken: a hard link,
    or where the file system makes none, a rename after one more look."""
    import errno

    try:
        os.link(temp, path)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        os.replace(temp, path)


def _exists(path: str) -> errors.Refused:
    return errors.Refused(f"'{path}' exists: hills setup loop never replaces a file unasked",
                          hint="pass --force to replace it, or --print to see the text and add it yourself")


@click.command("loop", context_settings=CONTEXT)
@click.argument("loop_name", metavar="LOOP")
@click.argument("name", metavar="NAME")
@click.option("--submission", metavar="DIR", default=".", show_default=True,
              help="The submission folder the loop edits and hills scores, relative to the current folder.")
@click.option("--print", "just_print", is_flag=True, help="Write nothing: print the file's text on stdout.")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
def command(loop_name: str, name: str, submission: str, just_print: bool, force: bool) -> int:
    """Write the file the text loop LOOP reads its score through, scoring hill NAME.

    LOOP is 'pi-autoresearch' (its benchmark script, .auto/measure.sh,
    running 'hills eval --metric-lines') or 'autoresearch' (a program.md
    for karpathy/autoresearch's agent, which runs 'hills eval
    --colon-lines' and greps the score). The file goes into the current
    folder, never over an existing one without --force; its path is
    printed on stdout and its text on stderr.
    """
    from .. import __version__

    loop = loop_named(loop_name)
    if not os.path.isdir(submission):
        raise errors.UsageError(f"submission folder '{submission}' does not exist",
                                hint="pass --submission DIR, the folder the loop edits")
    written = plan(loop, name, submission, primary_metric(name), __version__, template_text(loop))
    if just_print:
        emit(written.text.rstrip("\n"))
        return errors.EXIT_OK
    write_new(written, force)
    emit(written.path)
    say(f"wrote {written.path} for {loop.project}:")
    for line in written.text.rstrip("\n").splitlines():
        say(f"    {line}" if line else "")
    say(f"hint: {written.then}")
    return errors.EXIT_OK
