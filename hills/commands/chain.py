"""`hills chain`: append to, verify or show any signed, chained log file."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from ..base import errors
from ..evidence.trust import machine_keys
from ..cli.options import CONTEXT, HillsGroup, json_option
from ..cli.output import emit, emit_json

if TYPE_CHECKING:
    from ..evidence.chain import ChainReport


@click.group("chain", context_settings=CONTEXT, cls=HillsGroup)
def command() -> None:
    """Append to, verify or show any signed, chained log file."""


@command.command("append", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
def append(log_file: str) -> int:
    """Append the JSON object on stdin to FILE as a new chained line."""
    from ..evidence import chain, signing

    record = signing.parse_report(sys.stdin.read(), "<stdin>")
    entry = chain.append(log_file, record, machine_keys(for_signing=True))
    emit(json.dumps({"seq": entry["seq"], "mac": entry["mac"]}))
    return errors.EXIT_OK


@command.command("verify", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
@click.option("--head", "head_json", metavar="JSON", help="A {seq, mac} head kept elsewhere to check against.")
def verify(log_file: str, head_json: str | None) -> int:
    """Verify every line of FILE; print where the chain breaks. Exits 1 if broken."""
    from ..evidence import chain

    head = None
    if head_json:
        try:
            head = json.loads(head_json)
        except ValueError as exc:
            raise errors.UsageError(f"--head: not valid JSON: {exc}")
    result = chain.verify(log_file, machine_keys(), head=head)
    render(log_file, result)
    return errors.EXIT_OK if result.ok else errors.EXIT_NO


def render(log_file: str, result: ChainReport) -> None:
    """Whether the chain is intact, and where it breaks if not."""
    if result.ok:
        emit(f"chain intact: {result.count} entr{'y' if result.count == 1 else 'ies'} in {log_file}")
        return
    emit(f"chain BROKEN at line {result.break_line} of {log_file}")
    for problem in result.problems:
        emit(f"  {problem}")


@command.command("show", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
@json_option
def show(log_file: str, as_json: bool) -> int:
    """Print the entries of FILE, one per line (or as a JSON list)."""
    from ..evidence import chain

    entries = chain.read(log_file, machine_keys())
    if as_json:
        emit_json(entries)
        return errors.EXIT_OK
    for entry in entries:
        emit(json.dumps(entry, sort_keys=True, ensure_ascii=False))
    return errors.EXIT_OK
