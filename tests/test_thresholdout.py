"""Thresholdout's rule (hills/run/thresholdout.py) in simulation: Dwork et
al.'s experiment ("The reusable holdout", Science 2015) of features with
no signal, where a climber that keeps the features agreeing with the label
on its own split and on the holdout's answers overfits a plain holdout,
while the reusable one, for the same climber, stays within its bound.
Pure Python, fixed seeds; rates held within binomial bounds."""

import math
import random

from hills.run import thresholdout

ITEMS = 2500  # per split
FEATURES = 1000
VOTERS = 51  # the most features the climber's classifier keeps (odd: no tied votes)
THRESHOLD, SIGMA = 0.04, 0.01  # hill.yaml's defaults, the paper's experiment
BUDGET = 10
TRIALS = 50
SE = 0.5 / math.sqrt(ITEMS)  # the standard error of a rate near 1/2 on one split
# The bound of an answer about a classifier that cannot beat 1/2: the
# threshold (how far validation may stand from the holdout unanswered) and
# three standard errors of the holdout's own sampling.
BOUND = THRESHOLD + 3 * SE


def most_allowed(trials, rate, alpha=1e-3):
    """The largest count a true rate of `rate` exceeds with probability
    below alpha: the smallest c with P(Binomial(trials, rate) > c) < alpha."""
    log_pmf = [math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1)
               + k * math.log(rate) + (trials - k) * math.log1p(-rate) for k in range(trials + 1)]
    above = 0.0
    for count in range(trials, -1, -1):  # above: P(X > count)
        if above >= alpha:
            return count + 1
        above += math.exp(log_pmf[count])
    return 0


def fewest_allowed(trials, rate, alpha=1e-3):
    """The smallest count a true rate of `rate` falls below with probability below alpha."""
    return trials - most_allowed(trials, 1 - rate, alpha)


class Plain:
    """The plain holdout: every answer exact, no budget (the climber's
    queries are not counted here: a budget would stop it sooner)."""

    def __init__(self):
        self.asked = 0

    def ask(self, validation, holdout):
        self.asked += 1
        return holdout

    def left(self):
        return math.inf


class Reusable:
    """Thresholdout with a budget of releases, its noise from a seeded generator."""

    def __init__(self, seed):
        generator = random.Random(seed)
        self.draw = lambda scale: thresholdout.laplace(scale, generator.random)
        self.gamma = self.draw(2 * SIGMA)
        self.releases = self.asked = 0

    def ask(self, validation, holdout):
        assert self.releases < BUDGET  # a spent budget refuses (hills eval exits 5)
        self.asked += 1
        told = thresholdout.answer(validation, holdout, THRESHOLD, SIGMA, self.gamma, self.draw)
        if told.release:
            self.releases += 1
            self.gamma = told.next_gamma
        else:
            assert told.value == validation
        return told.value

    def left(self):
        return BUDGET - self.releases


def agreement(column, label):
    """The rate of items where a ±1 feature (bits of an int) equals the label."""
    return (ITEMS - (column ^ label).bit_count()) / ITEMS


def vote_accuracy(columns, signs, label):
    """The accuracy of the majority vote of the features, each with its sign."""
    every = (1 << ITEMS) - 1
    counts = [0] * ITEMS
    for column, sign in zip(columns, signs):
        for index, bit in enumerate(format(column if sign > 0 else column ^ every, f"0{ITEMS}b")):
            counts[index] += bit == "1"
    predicted = int("".join("1" if 2 * count > len(columns) else "0" for count in counts), 2)
    return agreement(predicted, label)


def climb(seed, holdout):
    """Dwork et al.'s analyst on data with no signal: ask the holdout about
    each feature's agreement with the label, keep those that agree on both
    splits beyond a standard error, vote with the strongest on its own
    split, and ask the holdout the vote's accuracy. Returns that answer and
    how many queries were answered; the true accuracy is 1/2."""
    generator = random.Random(seed)
    own = [generator.getrandbits(ITEMS) for _ in range(FEATURES)], generator.getrandbits(ITEMS)
    held = [generator.getrandbits(ITEMS) for _ in range(FEATURES)], generator.getrandbits(ITEMS)
    kept = []
    for feature in range(FEATURES):
        if holdout.left() <= 1:  # the last release is kept for the classifier's question
            break
        mine = agreement(own[0][feature], own[1]) - 0.5
        told = holdout.ask(mine + 0.5, agreement(held[0][feature], held[1])) - 0.5
        if abs(mine) > SE and abs(told) > SE and mine * told > 0:
            kept.append((abs(mine), feature, 1 if mine > 0 else -1))
    chosen = sorted(kept, reverse=True)[:VOTERS]
    if len(chosen) % 2 == 0:
        chosen = chosen[:-1]
    signs = [sign for _, _, sign in chosen]
    validation = vote_accuracy([own[0][feature] for _, feature, _ in chosen], signs, own[1])
    answer = holdout.ask(validation, vote_accuracy([held[0][feature] for _, feature, _ in chosen], signs, held[1]))
    return answer, holdout.asked


def test_an_adaptive_climber_overfits_the_plain_holdout_and_not_the_reusable_one():
    plain = [climb(seed, Plain()) for seed in range(TRIALS)]
    reusable = [climb(seed, Reusable(10_000 + seed)) for seed in range(TRIALS)]
    # Precondition: the climber did adapt, on the same data both times.
    assert all(asked == FEATURES + 1 for _, asked in plain)
    plain_over = sum(abs(answer - 0.5) > BOUND for answer, _ in plain)
    reusable_over = sum(abs(answer - 0.5) > BOUND for answer, _ in reusable)
    # The plain holdout reports a classifier of no skill as better than
    # chance beyond the bound in most trials (a rate of at least 1/2)...
    assert plain_over >= fewest_allowed(TRIALS, 0.5), plain_over
    assert sum(answer for answer, _ in plain) / TRIALS > 0.5 + BOUND
    # ...the reusable holdout in at most 5% of them,
    assert reusable_over <= most_allowed(TRIALS, 0.05), reusable_over
    # while answering several times as many queries as its budget of
    # releases, each of which a plain holdout of that budget would count.
    assert sum(asked for _, asked in reusable) / TRIALS >= 3 * BUDGET


def test_an_answer_is_the_validation_score_unless_the_splits_differ():
    draws = iter([0.0, 0.0, 0.5, -0.25])  # eta; eta, then xi and the next gamma of a release
    kept = thresholdout.answer(0.70, 0.72, 0.04, 0.01, 0.0, lambda scale: next(draws))
    assert kept == thresholdout.Answer(0.70, False, None)
    released = thresholdout.answer(0.70, 0.80, 0.04, 0.01, 0.0, lambda scale: next(draws))
    assert released == thresholdout.Answer(0.80 + 0.5, True, -0.25)
    scales = []
    thresholdout.answer(0.0, 9.0, 0.04, 0.01, 0.0, lambda scale: scales.append(scale) or 0.0)
    assert scales == [0.04, 0.01, 0.02]  # Laplace(4 sigma), Laplace(sigma), Laplace(2 sigma)


def test_laplace_draws_have_the_laplace_spread():
    generator = random.Random(7)
    draws = [thresholdout.laplace(2.0, generator.random) for _ in range(20_000)]
    # E|X| = b and P(|X| > b ln 20) = 5% for Laplace(0, b).
    assert abs(sum(abs(x) for x in draws) / len(draws) - 2.0) < 0.06
    beyond = sum(abs(x) > 2.0 * math.log(20) for x in draws)
    assert most_allowed(len(draws), 0.05, 1e-6) >= beyond >= fewest_allowed(len(draws), 0.05, 1e-6)
    positive = sum(x > 0 for x in draws)
    assert most_allowed(len(draws), 0.5, 1e-6) >= positive >= fewest_allowed(len(draws), 0.5, 1e-6)


def test_the_system_generator_stays_inside_the_open_interval():
    values = [thresholdout.system_uniform() for _ in range(2000)]
    assert all(0.0 < value < 1.0 for value in values) and len(set(values)) == len(values)
    assert all(math.isfinite(thresholdout.laplace(1.0)) for _ in range(2000))
