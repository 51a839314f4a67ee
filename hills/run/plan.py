"""An eval's plan (DESIGN section 6, step 1): the version it pins, the
params and knob values, the replicates and the signing key, resolved from
the request before anything is logged; every refusal here raises."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from .. import spaces
from ..base import state
from ..base.errors import NotScored, UsageError
from ..evidence import caller
from . import sandbox
from .pinned import pinned_tree, pinned_version
from .records import EvalPlan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..disk.hill import Hill
    from ..disk.manifest_types import Manifest as Spec
    from .records import EvalRequest


def resolve(req: EvalRequest) -> EvalPlan:
    """Pin the version the request scores and check what it asks (DESIGN
    section 6, step 1); every refusal here raises, before anything is logged."""
    hill = req.hill
    head = hill.repo.head()
    if req.current and req.force:
        raise UsageError("--current and --force cannot be combined")
    if head is None and not req.current:
        raise NotScored(f"hill '{hill.name}' has no commits yet",
                        hint=f"freeze it first: hills commit {hill.name} -m MESSAGE, "
                             "or try the working tree unofficially with --current")
    # --current scores the working tree, so it works before the first commit too.
    tree_hash = pinned_tree(hill, head) if head else None
    official, official_reason, forced = _official(req, tree_hash)
    corpus = None
    if req.current:
        from ..disk import manifest

        spec = manifest.load(hill.path)
    else:
        assert tree_hash is not None  # a hill without commits was refused above
        spec, corpus = pinned_version(hill, tree_hash, clean=not forced)
    params = resolve_params(spec, req.param_texts)
    # Fail closed (DESIGN 6.9): without a bubblewrap that confines, no eval
    # at all, before anything is logged, unless hill.yaml says `sandbox: none`.
    sandbox.level_for(spec)
    if not os.path.isdir(req.submission):
        raise UsageError(f"submission '{req.submission}' is not a folder",
                         hint="a submission is a folder; pass its path")
    _refuse_state_inside(req.submission)
    check_note(req.note)
    repeat = req.repeat if req.repeat is not None else spec["replicates"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"--repeat expects an integer >= 1, got {repeat}")
    _, trial, knob_warning = resolve_knobs(req)
    from ..evidence.trust import machine_keys

    key = machine_keys(for_signing=True)
    caller.trust()  # a claim of the service this process cannot back is refused here, before anything is logged
    if req.final and spec["final"]["budget"] == 0:
        raise NotScored(f"hill '{hill.name}' has no holdout split for --final: its hill.yaml sets final.budget "
                        "to 0, so no eval may look at the holdout",
                        hint="evals without --final score on the validation split; a hill that holds out data "
                             "sets final.budget to the looks it allows (hill.yaml(5))")
    if req.final and spec["final"]["budget"] is not None and req.current:
        raise NotScored(f"hill '{hill.name}' limits its holdout evals ({spec['final']['budget']} per version): "
                        "--final needs a committed version, not --current",
                        hint=f"commit the hill (hills commit {hill.name} -m MESSAGE) and drop --current")
    return EvalPlan(request=req, head=head, tree_hash=tree_hash, log_tree=None if req.current else tree_hash,
                    spec=spec, params=params, trial=trial, knob_warning=knob_warning, repeat=repeat,
                    official=official, official_reason=official_reason, forced=forced, key=key, corpus=corpus)


# A note names a change in a table cell and a plot's hover: a line, not a page.
MAX_NOTE = 200


def check_note(note: str | None) -> None:
    """Refuse a note (-m TEXT) that is not one line of printable text of
    1 to MAX_NOTE characters: it goes into the log, the signed report and
    the journal, where a newline or a terminal's escape would forge a row."""
    if note is None:
        return
    if not note.strip():
        raise UsageError("the note given with -m is empty", hint="say in a few words what this attempt changes")
    if len(note) > MAX_NOTE:
        raise UsageError(f"the note given with -m is {len(note)} characters long: at most {MAX_NOTE}",
                         hint="keep it to a line; the commit message can say more")
    for index, char in enumerate(note):
        # Allow-list: printable characters and the plain space; no newline,
        # tab, escape, direction override or other control character.
        if not char.isprintable():
            raise UsageError(f"the note given with -m holds the control character U+{ord(char):04X} at "
                             f"position {index + 1}: a note is one line of printable text",
                             hint="remove newlines, tabs and escapes from the note")


def _refuse_state_inside(submission: str) -> None:
    """A submission folder that holds the machine state would be copied
    into its own run folder as it is copied, without end."""
    folder, home = os.path.realpath(submission), os.path.realpath(state.home())
    if os.path.commonpath([folder, home]) == folder:
        raise UsageError(f"submission '{submission}' holds the machine state '{home}', where its run folder "
                         "would be", hint="pass the submission's own folder, or set HILLS_HOME outside it")


def _official(req: EvalRequest, tree_hash: str | None) -> tuple[bool, str | None, bool]:
    """(official, why not, forced): whether the report will be official, and
    whether it scores HEAD of a dirty hill (--force); a dirty hill without
    --force or --current is refused."""
    hill = req.hill
    if req.current:
        return False, "scored the working tree (--current), not a committed version", False
    assert tree_hash is not None  # resolve() refused a hill without commits
    changed = is_dirty(hill, tree_hash)
    from ..disk import pin

    official, official_reason = pin.official_status(hill, tree_hash)
    if req.ab is not None:
        # One run of an A/B is one draw of its side: the A/B report holds the
        # verdict, and a lucky draw must not become the version's best.
        official, official_reason = False, (
            f"a run of an A/B ({req.ab.get('role')}, pair {req.ab.get('pair')} of {req.ab.get('of')}, "
            f"A/B {req.ab.get('id')}): its verdict is the A/B report's, not a score")
    if changed and not req.force:
        raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                        + (", ..." if len(changed) > 3 else "") + ")",
                        hint="commit them, pass --force to score the last commit anyway, "
                             "or --current to try the working tree unofficially")
    return official, official_reason, bool(changed)


def is_dirty(hill: Hill, tree_hash: str | None = None) -> list[str]:
    """The changed files `git status` lists; [] at once, without git, when
    the index's stat data show a clean tree of `tree_hash` (gitobjects)."""
    if tree_hash is not None:
        from ..base import gitobjects
        from ..disk import hill as hill_module

        blobs = hill_module.excluded_blobs(hill.path)
        if blobs is not None and gitobjects.clean_by_stat(hill.repo.git_dir, hill.path, tree_hash, blobs):
            return []
    out = hill.repo.run("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
                        "--no-renames")
    return [record[3:] for record in out.split("\0") if record]


def resolve_params(spec: Spec, texts: Iterable[str]) -> dict[str, Any]:
    params = {name: param["default"] for name, param in spec["params"].items()}
    described = f"'hills describe {spec['name']}' lists the params with their types and bounds"
    for text in texts:
        if "=" not in text:
            raise UsageError(f"-p '{text}': expected NAME=VALUE",
                             hint=f"for example -p {next(iter(spec['params']))}=VALUE; {described}" if spec["params"]
                             else f"hill '{spec['name']}' declares no params")
        name, value = text.split("=", 1)
        name = name.strip()
        if name not in spec["params"]:
            allowed = ", ".join(sorted(spec["params"])) or "none"
            raise UsageError(f"unknown param '{name}' for hill '{spec['name']}'", hint=f"allowed params: {allowed}")
        try:
            from ..disk import manifest

            params[name] = manifest.parse_cli_value(name, spec["params"][name], value)
        except UsageError as exc:
            raise UsageError(f"-p '{text}': {exc.message}", hint=exc.hint or described) from None
    return params


def resolve_knobs(req: EvalRequest) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(declaration, trial values or None, warning) for the submission's params.json."""
    declaration, warning = spaces.load(req.submission) if os.path.isdir(req.submission) else (None, None)
    given = req.knobs
    if not given:
        return declaration, (spaces.defaults(declaration) if declaration else None), warning
    if declaration is None:
        raise UsageError(f"--knob given, but submission '{req.submission}' has "
                         + ("a malformed params.json: " + warning if warning else "no params.json declaring knobs"),
                         hint="declare each knob in the submission's params.json (its format is in "
                              "'man hills-tune'), or drop -k")
    values = dict(spaces.defaults(declaration))
    items: list[tuple[str, Any]] = []
    if isinstance(given, Mapping):
        items = list(given.items())
    else:
        for text in given:
            if "=" not in text:
                raise UsageError(f"--knob '{text}': expected NAME=VALUE",
                                 hint=f"for example -k {next(iter(declaration), 'NAME')}=VALUE, VALUE read as JSON")
            name, raw = text.split("=", 1)
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
            spec = declaration.get(name.strip(), {})
            # A categorical choice that reads as JSON ("1", "true") is meant as text.
            if spec.get("type") == "categorical" and raw in spec["choices"] and value not in spec["choices"]:
                value = raw
            items.append((name.strip(), value))
    for name, value in items:
        try:
            values[name] = spaces.check_value(declaration, name, value)
        except spaces.ValueRefused as exc:
            raise UsageError(f"refused: {exc}",
                             hint="the knobs and their ranges are declared in "
                                  f"{os.path.join(req.submission, 'params.json')}")
    return declaration, values, warning


def takes_in_while_booting(plan: EvalPlan, logged: bool) -> bool:
    """Whether the evaluator's process may boot while the hill and the
    submission are copied in: a committed version (not --current) scored
    by a function evaluator that is the first process to run (no solution
    phase, or one this submission does not take: evaluate.py's
    `_boots_first`, asked of the submission's folder, and asked again of the
    snapshot). (Its environment must be built, too: evaluate.py's
    `_pipeline`, which then loads `cryptography` only once the process is
    started.)"""
    spec, req = plan.spec, plan.request
    if not logged or req.current or plan.tree_hash is None \
            or spec["evaluator"]["shape"] != "function":
        return False
    solution = spec["solution"]
    first_split = "holdout" if req.final and not plan.reusable else "validation"
    return not solution or not (inputs_for(solution, first_split)
                                or takes_solution(solution, os.fspath(req.submission)))


def inputs_for(solution: dict[str, Any], split: str) -> str | None:
    inputs = solution["inputs"]
    return inputs.get(split) if inputs else None


def takes_solution(solution: dict[str, Any], snapshot_dir: str) -> bool:
    """Whether the submission takes the solution phase: it holds the
    `when` file (or the phase has none)."""
    when = solution["when"]
    return not when or os.path.lexists(os.path.join(snapshot_dir, when))
