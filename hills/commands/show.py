"""`hills show`: a report, rendered for a person."""

import click

from ..base import errors
from ..cli.options import CONTEXT
from ..cli.output import emit, say


@click.command("show", context_settings=CONTEXT)
@click.argument("report_path", metavar="REPORT")
@click.option("--picture", "picture_path", metavar="FILE",
              help="Also draw the submission's picture, when the evaluator gave one, as SVG into FILE.")
def command(report_path: str, picture_path: str | None) -> int:
    """Render a report for a person: verdict, metrics, breakdown, instances.

    Shows whether the signature is valid, the trust mode the report claims
    and its signer (the name its key is trusted under and its fingerprint;
    a claim of trust 'service' holds only with a key trusted as a
    service's), the status and reason, metrics with
    their replicate spread, side metrics, the details, unit tests, the report block with
    its worst segment first, and the instances worst first. Exits 1 when the
    signature is INVALID (the report is still shown, marked as such).
    """
    from ..evidence import signing, verify

    report = signing.load_report(report_path)
    found = verify.verdict(report)
    render(report, "signature valid" if found.ok else f"signature INVALID ({found.reason})",
           verify.signer_text(found, report) if found.ok else None)
    if picture_path is not None:
        _draw(report, picture_path)
    if found.ok:
        return errors.EXIT_OK
    if "does not trust" in found.reason:
        say(f"hint: {verify.UNTRUSTED_HINT}")
    if signing.NOT_A_SERVICE_KEY in found.reason:
        say(f"hint: {verify.SERVICE_KEY_HINT}")
    return errors.EXIT_NO


def _draw(report: dict, path: str) -> None:
    """The report's picture as SVG in `path`; a usage error when it has none."""
    from ..views import picture
    from ..base.state import atomic_write

    drawn = picture.of(report)
    if drawn is None:
        raise errors.UsageError("the report holds no picture: its evaluator puts none in its report block",
                                hint="see PICTURE in hills-report(5)")
    atomic_write(path, picture.draw(drawn))
    say(f"picture: {picture.describe(drawn)}, drawn in {path}")


def render(report: dict, verdict: str, signed_by: str | None = None) -> None:
    """The report, verdict first, on stdout."""
    from ..views import show

    show.render(report, verdict, emit, signed_by)
