"""A long history made fast, for the history benchmarks: real signed,
chained attempts-log lines (a `started` entry and its outcome per eval,
each report signed as an eval signs it) written in process with hills' own
signing code, copied from the report of one real eval. Run inside the
box (`Sandbox.inside`), so the machine key is the box's."""

import json
import os
import time

from hills.base import git
from hills.evidence import chain, signing, trust
from hills.run import logbook


def real_report(name, tree_hash):
    """The report of the newest outcome line of a version's log."""
    path = logbook.attempts_path(name, tree_hash)
    entries = chain.read(path)
    return next(entry["report"] for entry in reversed(entries) if isinstance(entry.get("report"), dict))


def grow(name, tree_hash, count, hill_dir=None, notes=False):
    """Add `count` evals (two lines each) to the log of version `tree_hash`
    of hill `name`; with `notes`, each official report is noted on the
    hill's HEAD as an eval notes it (hills_dir: the hill's folder). The
    last eval goes through `chain.append`, which writes the signed head."""
    key = trust.machine_keys(for_signing=True)
    trust.load_library()
    template = real_report(name, tree_hash)
    path = logbook.attempts_path(name, tree_hash)
    last = chain.head(path)
    assert last is not None, f"no log at {path}"
    seq, prev = last["seq"] + 1, last["mac"]
    repo = git.Repo(hill_dir) if notes else None
    head = repo.head() if repo else None
    value = (template.get("metrics") or [{}])[0].get("value", 1.0)
    pending = bytearray()
    with open(path, "ab") as handle:
        for index in range(count):
            report = json.loads(json.dumps(template))
            report["run_id"] = f"{template['run_id'][:20]}-{seq:08d}"
            report["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            report["submission_hash"] = "blake3:" + f"{index % 97:064x}"
            if report.get("metrics"):
                report["metrics"][0]["value"] = value * (1 + ((index * 7919) % 1000 - 500) / 1e6)
            started = {"started": {"run_id": report["run_id"], "hill": name, "tree_hash": tree_hash,
                                   "final": False, "submission_hash": report["submission_hash"],
                                   "timestamp": report["timestamp"], "pid": 1, "host": "bench",
                                   "pid_start": 1, "timeout_s": 60}}
            signing.seal(report, key)
            outcome_at = seq + 1
            if index == count - 1:
                handle.write(bytes(pending))
                handle.flush()
                pending.clear()
                # The head file names the line before the built ones: chain.append
                # would call that a rewrite, so it is written anew by the append.
                os.unlink(chain.head_path(path))
                entry = chain.append(path, started, key)
                done = chain.append(path, {"report": report, "start": {"seq": entry["seq"], "mac": entry["mac"]}},
                                    key)
                link = done["mac"]
            else:
                line, start_link = chain.encode_entry(started, seq, prev, key)
                pending += line
                line, link = chain.encode_entry({"report": report, "start": {"seq": seq, "mac": start_link}},
                                                outcome_at, start_link, key)
                pending += line
                if len(pending) > 1 << 22:
                    handle.write(bytes(pending))
                    pending.clear()
            if repo is not None and report.get("official"):
                logbook.add_note(repo, head, report, {"seq": outcome_at, "mac": link})
            seq, prev = outcome_at + 1, link
    return seq
