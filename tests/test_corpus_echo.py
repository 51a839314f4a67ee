"""The cheat corpus's echo of the public inputs: an evaluator that rewards
handing the inputs back fails `hills check`, naming the cheat; one that
checks the work passes."""

import pytest

from test_cheat_corpus import check, corpus_block, function_eval, make_hill

from testing.eval_fixtures import hill_yaml
from hills.checks import corpus

# Sort the numbers of data/numbers.json into answer.json. The weak scorer
# counts the numbers it finds, and a bonus for the exact order of the
# inputs (meant as "nothing lost"): the echo scores best.
WEAK = """\
numbers = json.loads(Path(__file__).with_name("data").joinpath("numbers.json").read_text())
try:
    answer = json.loads((submission / "answer.json").read_text())
except (OSError, ValueError):
    answer = []
answer = answer if isinstance(answer, list) else []
score = float(len(set(answer) & set(numbers)) + (1 if answer == numbers else 0))
passed = bool(answer)
"""
STRICT = WEAK.replace("+ (1 if answer == numbers else 0)", "").replace(
    "passed = bool(answer)", "passed = answer == sorted(numbers)")


def _hill(name, body):
    return make_hill(name, {"eval.py": function_eval(body), "hill.yaml": hill_yaml(name),
                            "data/numbers.json": "[3, 1, 2]"},
                     {"answer.json": "[1, 2, 3]"})


@pytest.mark.slow
def test_the_echo_gets_through_a_scorer_that_rewards_the_inputs():
    assert corpus.VERSION >= 2
    _hill("echoed", WEAK)
    result = check("echoed")
    assert result.code == 1, result.output
    block = corpus_block(result)
    assert "echo of the public inputs" in block, block


@pytest.mark.slow
def test_a_scorer_that_checks_the_work_holds():
    _hill("unechoed", STRICT)
    result = check("unechoed")
    assert result.code == 0, result.output
    assert "none got through; corpus v2" in corpus_block(result)
