"""Canonical JSON and the HMAC signature that seals every hills report.

A signature is `hmac-sha256:<hex>`, keyed with the machine key, over the
canonical JSON of the report without its `signature` key: keys sorted,
separators `,` and `:`, UTF-8 text (no `\\u` escapes beyond what JSON needs),
numbers exactly as Python's json module writes them, and finite numbers only.
"""

from __future__ import annotations

import json
import math
import re
import time

from .digests import compare_digest, hmac_sha256
from .errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, NoReturn

SCHEME = "hmac-sha256"
SELF_REPORTED_REASON = "signed by hills-sign, not produced by an evaluator"

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def canonical_json(obj: object) -> bytes:
    """The canonical UTF-8 encoding of `obj`; refuses NaN, inf and non-JSON values."""
    try:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError) as exc:
        # The encoder does not say where the bad value sits; find it only on
        # this rare path so the common case stays one C call.
        found = _find_unencodable(obj, "")
        if found is None:
            raise UsageError(f"value cannot be written as canonical JSON: {exc}")
        path, what = found
        where = f"'{path}'" if path else "the top level"
        raise UsageError(f"value at {where} is {what}",
                         hint="reports and log entries hold finite numbers, strings, booleans, null, lists and objects only")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("value holds text that is not valid Unicode (a lone surrogate)",
                         hint="reports and log entries are UTF-8; replace the offending characters")


def clean_text(value: Any) -> Any:
    """`value` with every string made encodable as UTF-8: a lone surrogate
    (from a file name or an evaluator's output) becomes a visible escape."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_text(v) for v in value]
    return value


def _find_unencodable(value: object, path: str) -> tuple[str, str] | None:
    if isinstance(value, float):
        if not math.isfinite(value):
            return path, f"not a finite number ({value!r})"
        return None
    if value is None or isinstance(value, (str, int, bool)):
        return None
    if isinstance(value, dict):
        kinds = {type(key) for key in value}
        if len(kinds) > 1 and str in kinds:
            return path, "an object whose keys mix strings and other types"
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                return path, f"an object with a {type(key).__name__} key"
            name = str(key)
            if _PLAIN_KEY.match(name):
                child = f"{path}.{name}" if path else name
            else:
                child = f"{path}[{json.dumps(name, ensure_ascii=False)}]"
            found = _find_unencodable(item, child)
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _find_unencodable(item, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    return path, f"a {type(value).__name__}, which JSON cannot hold"


def _unsigned(envelope: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in envelope.items() if key != "signature"}


def _digest(envelope: dict[str, Any], key: bytes) -> str:
    return hmac_sha256(key, canonical_json(_unsigned(envelope)))


def sign(envelope: dict[str, Any], key: bytes) -> str:
    """The signature of `envelope` (its own `signature` key is ignored)."""
    return f"{SCHEME}:{_digest(envelope, key)}"


def verify(envelope: object, key: bytes) -> tuple[bool, str]:
    """(ok, reason): whether `envelope` carries a valid signature for `key`."""
    if not isinstance(envelope, dict):
        return False, f"signature INVALID: a report is a JSON object, not {json_kind(envelope)}"
    signature = envelope.get("signature")
    if signature is None or signature == "":
        return False, "no signature"
    if not isinstance(signature, str):
        return False, f"signature INVALID: the signature is a {type(signature).__name__}, not a string"
    scheme, colon, given = signature.partition(":")
    if not colon or scheme != SCHEME:
        return False, f"unknown signature scheme '{scheme if colon else signature}'"
    try:
        expected = _digest(envelope, key)
    except UsageError as exc:
        return False, f"signature INVALID: {exc.message}"
    if compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace")):
        return True, "signature valid"
    return False, "signature INVALID: the report was edited, or signed with another machine's key"


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a finite number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Parsers disagree on which duplicate wins; a report with two `passed`
    # keys could read differently in a viewer than in hills, so refuse it.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key '{key}'")
        result[key] = value
    return result


def parse_report(text: str | bytes, source: str) -> dict[str, Any]:
    """Parse report text; `source` names it in errors (a path or '<stdin>')."""
    try:
        report = json.loads(text, object_pairs_hook=_no_duplicates,
                            parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"report '{source}' is not valid JSON: {exc.msg} "
                         f"at line {exc.lineno} column {exc.colno}")
    except ValueError as exc:
        raise UsageError(f"report '{source}' is not valid: {exc}")
    if not isinstance(report, dict):
        raise UsageError(f"report '{source}' is not a JSON object (it is {json_kind(report)})")
    return report


def json_kind(value: object) -> str:
    """How an error message names the JSON type of `value`."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def load_report(path: Path | str) -> dict[str, Any]:
    """Read a report file (`-` reads stdin) into a dict."""
    if path == "-":
        import sys
        data = sys.stdin.buffer.read()
        source = "<stdin>"
    else:
        source = str(path)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise UsageError(f"report '{source}' does not exist")
        except IsADirectoryError:
            raise UsageError(f"report '{source}' is a folder, not a file")
        except OSError as exc:
            raise UsageError(f"cannot read report '{source}': {exc.strerror}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"report '{source}' is not UTF-8 text (bad byte at offset {exc.start})")
    return parse_report(text, source)


def utc_timestamp(seconds: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def self_reported(payload: object, key: bytes) -> dict[str, Any]:
    """What `hills-sign` emits: `payload` marked unofficial and self-reported, then signed."""
    if not isinstance(payload, dict):
        raise UsageError(f"hills-sign signs a JSON object, not {json_kind(payload)}")
    envelope = _unsigned(payload)
    envelope["official"] = False
    envelope["trust"] = "self-reported"
    envelope["official_reason"] = SELF_REPORTED_REASON
    if "timestamp" not in envelope:
        envelope["timestamp"] = utc_timestamp()
    envelope["signature"] = sign(envelope, key)
    return envelope
