"""utils/robust_stats.py against hand computations on small fixed sets, and its bootstrap against the exact
bootstrap distribution, enumerated."""
import itertools

import numpy as np
import pytest

from utils import robust_stats as rs

# 3 runs x 2 tasks. All six sorted: 0.1 0.2 0.4 0.5 0.7 0.9; int(0.25 * 6) = 1 cut from each end.
SCORES = np.array([[0.1, 0.9], [0.4, 0.2], [0.7, 0.5]])


def test_point_estimates_are_the_hand_computed_ones():
    assert rs.iqm(SCORES) == pytest.approx((0.2 + 0.4 + 0.5 + 0.7) / 4)
    # Task means 0.4 and 1.6 / 3.
    assert rs.mean(SCORES) == pytest.approx((0.4 + 1.6 / 3) / 2)
    assert rs.median(SCORES) == pytest.approx((0.4 + 1.6 / 3) / 2)
    assert rs.optimality_gap(np.array([[1.2, 0.5], [0.9, 0.0]])) == pytest.approx(1 - (1 + 0.5 + 0.9 + 0) / 4)
    # 8 scores: 2 cut from each end.
    assert rs.iqm(np.array([[1, 2, 3, 4], [5, 6, 7, 100]], dtype=float)) == pytest.approx((3 + 4 + 5 + 6) / 4)


def test_probability_of_improvement_counts_pairs_with_ties_as_half():
    x, y = np.array([[0.1, 1.0], [0.5, 1.0]]), np.array([[0.3, 0.0], [0.5, 0.0]])
    # Task 0: of (0.1, 0.3) (0.1, 0.5) (0.5, 0.3) (0.5, 0.5) one win and one tie: 1.5 / 4. Task 1: 1.
    assert rs.improvement_probability(x, y) == pytest.approx((0.375 + 1.0) / 2)
    assert rs.improvement_probability(SCORES, SCORES) == pytest.approx(0.5)


def test_performance_profile_is_the_share_above_each_threshold():
    assert rs.performance_profile(SCORES, np.array([0.0, 0.45, 0.9])).tolist() == pytest.approx([1, 0.5, 0])


def test_metrics_take_stacks_of_score_arrays():
    stack = np.stack([SCORES, SCORES[::-1], 1 - SCORES])  # [3, runs, tasks]
    for metric in rs.AGGREGATES.values():
        assert metric(stack) == pytest.approx([metric(s) for s in stack])
    assert rs.performance_profile(stack, np.array([0.3])).shape == (3, 1)


def test_resamples_draw_runs_within_each_task():
    resamples = rs.resample(SCORES, 2000, np.random.default_rng(1))
    assert resamples.shape == (2000, 3, 2)
    for task in range(2):
        assert set(np.unique(resamples[:, :, task])) == set(SCORES[:, task])


def exact_quantile(values: np.ndarray, q: float) -> float:
    """The q-quantile of equally likely `values` (the lower one at a step)."""
    ordered = np.sort(values)
    return float(ordered[int(np.floor(q * (len(ordered) - 1)))])


@pytest.mark.parametrize("name", ["IQM", "mean"])
def test_the_bootstrap_interval_matches_the_enumerated_bootstrap_distribution(name):
    metric = rs.AGGREGATES[name]
    # Every resample of 3 runs on each of 2 tasks: 27 x 27 equally likely ones.
    picks = list(itertools.product(range(3), repeat=3))
    exact = np.array([metric(np.stack([SCORES[list(a), 0], SCORES[list(b), 1]], axis=1))
                      for a in picks for b in picks])
    point, low, high = rs.interval(metric, SCORES)
    assert point == pytest.approx(metric(SCORES))
    assert exact_quantile(exact, 0.02) <= low <= exact_quantile(exact, 0.03)
    assert exact_quantile(exact, 0.97) <= high <= exact_quantile(exact, 0.98)


def test_the_interval_of_the_probability_of_improvement_resamples_both_sides():
    x, y = np.array([[0.0], [1.0]]), np.array([[0.5], [0.5]])
    # Resamples of x: both 0 (p 1/4, P = 0), one each (1/2, P = 0.5), both 1 (1/4, P = 1); y never changes.
    point, low, high = rs.interval(rs.improvement_probability, x, y, reps=20_000)
    assert (point, low, high) == (0.5, 0.0, 1.0)


def test_a_table_rebuilt_gives_the_same_intervals():
    assert rs.interval(rs.iqm, SCORES, reps=500) == rs.interval(rs.iqm, SCORES, reps=500)
