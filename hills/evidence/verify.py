"""Checking report signatures, the core of `hills verify` and `hills show`:
free of click, YAML and `cryptography`, so `hills verify` starts about as
fast as the interpreter. A report verifies with nothing but public keys:
the machine's own and those `hills trust` added."""

from __future__ import annotations

import os

from . import signing, trust
from ..base.errors import HillsError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .signing import Verdict
    from .trust import Keys, Signer

UNTRUSTED_HINT = ("compare the fingerprint with what 'hills key' prints on the machine that signed it; "
                  "if it is that machine's, run 'hills trust add NAME KEY' with the line 'hills key' printed")
LEGACY_HINT = "a report signed before Ed25519 keys verifies only on the machine that signed it"
SERVICE_KEY_HINT = ("only an evaluation service's key signs a report that says trust 'service'; if the key is the "
                    "service's, trust it as one: hills trust add --service NAME KEY, with the line 'hills key' "
                    "prints through the service")
TRUST_MEANING = {"service": "signed by the evaluation service, whose key the climber cannot read",
                 "same-user": "signed with the key of the user who ran the eval, who could have signed anything",
                 "self-reported": "signed by hills-sign, not produced by an evaluator",
                 "evaluator": "what older hills said for same-user"}


def signer_text(found: Verdict, report: dict) -> str:
    """Who signed a report that verifies: the name its key is trusted under
    (or this machine), its fingerprint, and its role when a service's."""
    name = found.signer if found.signer in (signing.LOCAL, signing.LEGACY_SIGNER) else f"'{found.signer}'"
    fingerprint = f" ({report.get('signer')})" if isinstance(report.get("signer"), str) else ""
    return name + fingerprint + (", trusted as a service key" if found.service_key else "")


def trust_text(report: dict) -> str:
    """The trust mode a report claims, and what it means."""
    claim = report.get("trust")
    if claim is None:
        return "not stated (a report from before trust modes)"
    return f"{claim} ({TRUST_MEANING[claim]})" if claim in TRUST_MEANING else str(claim)


def verdict(report: dict, keys: Keys | None = None, allowed: list[Signer] | None = None) -> Verdict:
    """Whether one parsed report's signature holds, by this machine's key
    or a trusted one."""
    keys = keys if keys is not None else trust.machine_keys()
    allowed = allowed if allowed is not None else trust.trusted()
    return signing.verify(report, keys, allowed)


def check(paths: list[str] | tuple[str, ...], keys: Keys | None = None,
          allowed: list[Signer] | None = None) -> list[tuple[str, Verdict, dict | None]]:
    """[(path, verdict, report_or_None)] for each path; nothing is created."""
    keys = keys if keys is not None else trust.machine_keys()
    allowed = allowed if allowed is not None else trust.trusted()
    results: list[tuple[str, Verdict, dict | None]] = []
    for path in paths:
        try:
            report = signing.load_report(path)
        except HillsError as exc:
            results.append((path, signing.Verdict(False, exc.message), None))
            continue
        results.append((path, signing.verify(report, keys, allowed), report))
    return results


def principal(found: Verdict) -> str:
    """The allowed_signers name of a verdict's signer: the trusted name, or
    `hills@HOST` for this machine's own key."""
    if found.signer is None or found.signer == signing.LOCAL:
        return trust.comment()
    return found.signer


def export(folder: str, report_path: str) -> tuple[Verdict, str]:
    """Write `message`, `report.sig` and `allowed_signers` for a report
    that verifies here into `folder`, so that OpenSSH alone checks it;
    returns (verdict, the ssh-keygen command line)."""
    report = signing.load_report(report_path)
    found = verdict(report)
    if not found.ok:
        return found, ""
    signature = report["signature"]
    if not isinstance(signature, str) or not signature.startswith(signing.SCHEME + ":"):
        raise UsageError(f"report '{report_path}' is signed with an old HMAC secret, which OpenSSH cannot check",
                         hint=LEGACY_HINT)
    from ..base import ed25519
    from ..base.state import atomic_write

    assert found.public is not None
    name = principal(found)
    os.makedirs(folder, exist_ok=True)
    atomic_write(os.path.join(folder, "message"), signing.message(report))
    atomic_write(os.path.join(folder, "report.sig"), ed25519.armor(signing.decode_signature(signature)))
    atomic_write(os.path.join(folder, "allowed_signers"), trust.Signer(name, found.public).line() + "\n")
    command = (f"ssh-keygen -Y verify -f allowed_signers -I {name} -n {signing.NAMESPACE} "
               f"-s report.sig < message")
    return found, command
