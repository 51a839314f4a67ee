"""One options record for `hills eval` (hills.commands.eval.EvalOptions):
click's callback, the fast parse, the batch path, the warm spare's standby
and the service's eval fields all speak it, and the EvalRequest it makes
is the same whichever surface asked."""

import click
import pytest

from hills.disk import hill
from hills.run import evaluate
from hills.service import requests as service_requests
from hills.commands import eval as eval_command
from hills.run.evaluate import EvalRequest

FIELDS = list(eval_command.EvalOptions._fields_)


class Stop(Exception):
    """Raised by the stand-in evaluate once it has the request."""


@pytest.fixture
def asked(monkeypatch, tmp_path):
    """The requests `evaluate.evaluate` is called with, in order; each call
    stops the command there. Hills resolve to '<NAME>' without a disk."""
    monkeypatch.chdir(tmp_path)
    for name in ("sub", "other"):
        (tmp_path / name).mkdir()
    requests = []

    def evaluate_stub(request, say=None, standby=None):
        requests.append(request)
        raise Stop

    monkeypatch.setattr(evaluate, "evaluate", evaluate_stub)
    monkeypatch.setattr(hill, "resolve", lambda name: f"<{name}>")
    return requests


def test_the_record_has_one_field_per_declared_parameter_in_order():
    assert FIELDS == [param.dest for param in eval_command.DECLARED.params]
    assert [param.name for param in eval_command.command.params] == FIELDS


def test_the_service_eval_fields_are_the_records_fields():
    """A field the service passes on that the record lacks would fail every
    served eval; one the record has that the service lacks, refused there."""
    assert {field.dest for field in service_requests.VERBS["eval"].fields} == set(FIELDS)


@pytest.mark.parametrize("argv", [["sub", "-H", "cp"], ["sub", "--hill=cp", "--json", "-q", "--progress"],
                                  ["sub", "-Hcp", "-p", "n=3", "-k", "a=1", "--knob", "b=2", "--repeat=007"],
                                  ["sub", "other", "-H", "cp", "--on", "ray", "--workers", "2"],
                                  ["sub", "-H", "cp", "--against", "other", "--repeat", "3", "-o", "r.json"]])
def test_click_and_the_fast_parse_make_the_same_record(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    for name in ("sub", "other"):
        (tmp_path / name).mkdir()
    ctx = eval_command.command.make_context("eval", list(argv))
    fast = eval_command.parsed_options(argv)
    assert fast is not None
    assert eval_command.EvalOptions(**ctx.params) == fast


def test_the_fast_parse_leaves_help_to_click():
    assert eval_command.parsed_options(["sub", "-H", "cp", "--help"]) is None
    with pytest.raises(click.exceptions.Exit):
        eval_command.command.make_context("eval", ["sub", "-H", "cp", "--help"])


def test_an_unknown_option_name_is_no_record():
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        eval_command.EvalOptions(submissions=("sub",), hill_name="cp", nope=True)


ARGV = ["sub", "-H", "cp", "-p", "n=3", "-p", "tolerance=0.1", "-k", "a=1", "--final", "--queue", "--repeat", "3",
        "-o", "report.json", "--json"]
EXPECTED = EvalRequest("<cp>", "sub", ("n=3", "tolerance=0.1"), final=True, force=False, current=False, queue=True,
                       verbose=False, repeat=3, knobs=("a=1",))


def test_the_command_and_the_standby_make_the_same_request(asked):
    with pytest.raises(Stop):
        eval_command.run(**eval_command.DECLARED.parse(ARGV))
    assert asked == [EXPECTED]
    assert eval_command.standby_request(ARGV) == EXPECTED
    plain = eval_command.standby_request(["sub", "-H", "cp", "--force", "--current", "-v"])
    assert plain == EvalRequest("<cp>", "sub", (), force=True, current=True, verbose=True, knobs=None)


@pytest.mark.parametrize("argv", [["sub", "other", "-H", "cp"], ["sub", "-H", "cp", "--on", "ray"],
                                  ["sub", "-H", "cp", "--workers", "2"],
                                  ["sub", "-H", "cp", "--against", "other", "--repeat", "3"],
                                  ["sub", "-H", "cp", "--help"]])
def test_no_standby_for_what_one_eval_here_does_not_run(asked, argv):
    assert eval_command.standby_request(argv) is None


def test_the_batch_path_makes_the_same_request_per_submission(asked):
    argv = ["sub", "other", *ARGV[1:]]
    with pytest.raises(Stop):
        eval_command.run(**eval_command.DECLARED.parse(argv))
    assert asked == [EXPECTED]  # the first submission's, as a single eval makes it
    options = eval_command.parsed_options(argv)
    assert options is not None and options.batched()
    assert options.request("<cp>", "other") == EvalRequest("<cp>", "other", EXPECTED.param_texts, final=True,
                                                           queue=True, repeat=3, knobs=("a=1",))
