"""Canonical JSON and the Ed25519 signature that seals every hills report.

A signature is `sshsig:` and the base64 of an SSHSIG blob (OpenSSH's
PROTOCOL.sshsig, namespace `hills-report`, hash sha512) by the key the
report names as `signer` (`SHA256:...`), over the canonical JSON of the
report without its `signature` key: keys sorted,
separators `,` and `:`, UTF-8 text (no `\\u` escapes beyond what JSON needs),
numbers exactly as Python's json module writes them, and finite numbers only.
So `ssh-keygen -Y verify -n hills-report` checks it too (`hills verify
--export`). A report from before Ed25519 carries `hmac-sha256:<hex>`,
keyed with that machine's old secret, which only that machine can check.
"""

from __future__ import annotations

import binascii
import json
import math
import re
import time

from ..base import ed25519
from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path
    from typing import Any, NoReturn

    from .trust import Keys, Signer

SCHEME = "sshsig"
NAMESPACE = "hills-report"
LEGACY_SCHEME = "hmac-sha256"
LEGACY_SIGNER = "this machine's old HMAC secret"
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
                         hint="reports and log entries hold finite numbers, strings, booleans, null, lists and "
                              "objects only")
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


def _unsigned(envelope: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in envelope.items() if key != "signature"}


def message(envelope: Mapping[str, Any]) -> bytes:
    """The bytes a report's signature signs: its canonical JSON without `signature`."""
    return canonical_json(_unsigned(envelope))


def sign(envelope: Mapping[str, Any], keys: Keys) -> str:
    """The signature of `envelope` as it stands (its own `signature` key is
    ignored): `sshsig:` and the base64 of an SSHSIG blob over `message`.
    A report that says `trust: "service"` is signed only by the service's
    own process: its key is the one a climber trusts as the service's."""
    assert keys.public is not None
    if envelope.get("trust") == SERVICE:
        from .caller import not_the_service
        from ..base.errors import EnvironmentProblem

        why = not_the_service()
        if why:
            raise EnvironmentProblem(f"refusing to sign a report that says trust 'service': this process is not "
                                     f"the hills service ({why})",
                                     hint="a report signed with this machine's key says trust 'same-user'")
    signed = ed25519.sshsig_signed_data(NAMESPACE, message(envelope))
    blob = ed25519.sshsig_blob(keys.public, NAMESPACE, keys.sign(signed))
    return SCHEME + ":" + binascii.b2a_base64(blob, newline=False).decode("ascii")


def seal(envelope: dict[str, Any], keys: Keys) -> None:
    """Name the machine's key as the `signer` of `envelope`, then sign it."""
    envelope.pop("signature", None)
    envelope["signer"] = keys.fingerprint
    envelope["signature"] = sign(envelope, keys)


class Verdict:
    """Whether a report's signature holds (`ok`), why (`reason`), and who
    signed it: `signer` ("this machine", a trusted name, or None), `public`
    (the signing key's bytes when the signature names one), and whether
    that key is trusted as an evaluation service's (`service_key`)."""

    __slots__ = ("ok", "reason", "signer", "public", "service_key")

    def __init__(self, ok: bool, reason: str, signer: str | None = None, public: bytes | None = None,
                 service_key: bool = False) -> None:
        self.ok = ok
        self.reason = reason
        self.signer = signer
        self.public = public
        self.service_key = service_key

    def __iter__(self) -> Iterator[Any]:
        return iter((self.ok, self.reason))

    def __getitem__(self, index: int) -> Any:
        return (self.ok, self.reason)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return (self.ok, self.reason) == other
        if isinstance(other, Verdict):
            return ((self.ok, self.reason, self.signer, self.public)
                    == (other.ok, other.reason, other.signer, other.public))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Verdict(ok={self.ok}, reason={self.reason!r}, signer={self.signer!r})"


LOCAL = "this machine"
SERVICE = "service"
# `evaluator` is what reports of older hills say for `same-user`.
TRUST_MODES = ("service", "same-user", "self-reported", "evaluator")
NOT_A_SERVICE_KEY = "is not trusted as a service key"


def decode_signature(text: str) -> bytes:
    """The SSHSIG blob of a `sshsig:` signature; ValueError when it is none."""
    scheme, colon, body = text.partition(":")
    if not colon or scheme != SCHEME:
        raise ValueError(f"unknown signature scheme '{scheme if colon else text}'")
    try:
        return binascii.a2b_base64(body.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError("the signature is not base64") from None


def verify(envelope: object, keys: Keys, allowed: Sequence[Signer] | None = None) -> Verdict:
    """Whether `envelope` carries a valid signature by the machine's key, a
    key of `allowed` (the trusted keys), or (for an old report) the
    machine's old HMAC secret."""
    if not isinstance(envelope, dict):
        return Verdict(False, f"signature INVALID: a report is a JSON object, not {json_kind(envelope)}")
    signature = envelope.get("signature")
    if signature is None or signature == "":
        return Verdict(False, "no signature")
    if not isinstance(signature, str):
        return Verdict(False, f"signature INVALID: the signature is a {type(signature).__name__}, not a string")
    if signature.startswith(LEGACY_SCHEME + ":"):
        return _verify_legacy(envelope, signature, keys.legacy)
    if not signature.startswith(SCHEME + ":"):
        scheme, colon, _ = signature.partition(":")
        return Verdict(False, f"unknown signature scheme '{scheme if colon else signature}'")
    try:
        public, namespace, raw = ed25519.parse_sshsig(decode_signature(signature))
    except ValueError as exc:
        return Verdict(False, f"signature INVALID: {exc}")
    if namespace != NAMESPACE:
        return Verdict(False, f"signature INVALID: signed for namespace '{namespace}', not '{NAMESPACE}'")
    fingerprint = ed25519.fingerprint(public)
    if envelope.get("signer") != fingerprint:
        return Verdict(False, f"signature INVALID: the report names signer '{envelope.get('signer')}' "
                              f"but was signed by {fingerprint}", public=public)
    try:
        signed = ed25519.sshsig_signed_data(NAMESPACE, message(envelope))
    except UsageError as exc:
        return Verdict(False, f"signature INVALID: {exc.message}", public=public)
    from .trust import check

    if not check(public, signed, raw):
        return Verdict(False, "signature INVALID: this report was edited after it was signed", public=public)
    if public == keys.public:
        return _bound(envelope, LOCAL, public, fingerprint, None)
    for signer in allowed or ():
        if signer.public == public:
            return _bound(envelope, signer.name, public, fingerprint, signer.service)
    return Verdict(False, f"signature INVALID: signed by {fingerprint}, a key this machine does not trust",
                   public=public)


def _bound(envelope: dict[str, Any], name: str, public: bytes | None, fingerprint: str,
           service: bool | None) -> Verdict:
    """The verdict on a report whose signature holds, by the key trusted as
    `name`: valid unless its `trust` claims what that key cannot back. Only
    a key trusted as a service's (`service`; for this machine's own key,
    None: a service key only in the service's own process) backs
    `service`; a claim that is no trust mode at all backs nothing."""
    claim = envelope.get("trust")
    if claim == SERVICE:
        if service is None:
            from .caller import not_the_service

            service = not not_the_service()
        if not service:
            who = "this machine's key" if name == LOCAL else f"'{name}'"
            return Verdict(False, f"signature INVALID as a service report: it claims trust 'service', but its "
                                  f"signer, {who} ({fingerprint}), {NOT_A_SERVICE_KEY}", name, public)
    elif claim is not None and (not isinstance(claim, str) or claim not in TRUST_MODES):
        return Verdict(False, f"signature INVALID: trust {json.dumps(claim)} is no trust mode "
                              f"(expected one of {', '.join(TRUST_MODES)})", name, public)
    return Verdict(True, "signature valid", name, public, bool(service))


def _verify_legacy(envelope: dict[str, Any], signature: str, secret: bytes | None) -> Verdict:
    """A report signed before Ed25519: `hmac-sha256:<hex>` with the machine's old secret."""
    if secret is None:
        return Verdict(False, "signature INVALID: signed with an old HMAC secret this machine does not have "
                              "(only the machine that signed it can check it)")
    import hashlib
    import hmac

    try:
        expected = hmac.new(secret, message(envelope), hashlib.sha256).hexdigest()
    except UsageError as exc:
        return Verdict(False, f"signature INVALID: {exc.message}")
    given = signature.partition(":")[2]
    if hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace")):
        return _bound(envelope, LEGACY_SIGNER, None, "an HMAC secret", None)
    return Verdict(False, "signature INVALID: the report was edited, or signed with another machine's old secret")


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


def self_reported(payload: object, keys: Keys) -> dict[str, Any]:
    """What `hills-sign` emits: `payload` marked unofficial and self-reported, then signed."""
    if not isinstance(payload, dict):
        raise UsageError(f"hills-sign signs a JSON object, not {json_kind(payload)}")
    envelope = _unsigned(payload)
    envelope["official"] = False
    envelope["trust"] = "self-reported"
    envelope["official_reason"] = SELF_REPORTED_REASON
    if "timestamp" not in envelope:
        envelope["timestamp"] = utc_timestamp()
    seal(envelope, keys)
    return envelope
