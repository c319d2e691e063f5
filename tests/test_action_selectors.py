"""Epsilon-greedy action selection and the epsilon schedules."""
import math
from types import SimpleNamespace

import pytest
import torch as th

from torch.distributions import Categorical

from components.action_selectors import REGISTRY, EpsilonGreedyActionSelector, categorical_sample
from components.epsilon_schedules import DecayThenFlatSchedule

th.set_num_threads(1)


def make_args(**overrides) -> SimpleNamespace:
    args = dict(epsilon_start=1.0, epsilon_finish=0.05, epsilon_anneal_time=100000, test_greedy=True)
    args.update(overrides)
    return SimpleNamespace(**args)


def random_avail(bs: int, n_agents: int, n_actions: int) -> th.Tensor:
    """Random 0/1 availability with at least one available action per agent."""
    avail = (th.rand(bs, n_agents, n_actions) < 0.4).int()
    avail[..., 0] |= (avail.sum(-1) == 0).int()
    return avail


def test_registry_name():
    assert REGISTRY["epsilon_greedy"] is EpsilonGreedyActionSelector


@pytest.mark.parametrize("t_env", [0, 10**7])  # epsilon 1.0 (all random) and epsilon_finish
def test_never_picks_unavailable_action(t_env):
    th.manual_seed(0)
    selector = EpsilonGreedyActionSelector(make_args(epsilon_finish=0.0))
    for _ in range(200):
        # Large Q-values on unavailable actions must still never be chosen.
        avail = random_avail(16, 3, 7)
        qs = th.randn(16, 3, 7) + 100.0 * (1 - avail)
        actions = selector.select_action(qs, avail, t_env)
        assert actions.shape == (16, 3) and actions.dtype == th.long
        assert avail.gather(-1, actions.unsqueeze(-1)).all()
    assert selector.epsilon == (1.0 if t_env == 0 else 0.0)


def test_greedy_picks_best_available_action():
    selector = EpsilonGreedyActionSelector(make_args(epsilon_start=0.0, epsilon_finish=0.0))
    qs = th.tensor([[[5.0, 1.0, 3.0, -2.0], [-1.0, -4.0, -3.0, -2.0]]])  # [1, 2, 4]
    avail = th.tensor([[[0, 1, 1, 1], [0, 1, 1, 0]]])
    assert selector.select_action(qs, avail, t_env=0).tolist() == [[2, 2]]


def test_the_categorical_draw_is_torchs_categorical_draw_from_the_same_random_state():
    """categorical_sample stands in for Categorical(...).sample() (PyMARL2's draw): the same actions
    from the same seed, so that a run's numbers did not change with it."""
    weights = (th.rand(7, 3, 6) < 0.6).float() * th.rand(7, 3, 6)
    weights[..., 0] += 0.1  # every row has a positive weight
    for seed in range(5):
        th.manual_seed(seed)
        expected = [Categorical(probs=weights, validate_args=False).sample() for _ in range(3)]
        after = th.rand(4)
        th.manual_seed(seed)
        assert all(th.equal(categorical_sample(weights), draw) for draw in expected)
        assert th.equal(th.rand(4), after)  # the random state moved on as torch's draw moves it
    with pytest.raises(ValueError, match="a row has no positive weight"):
        categorical_sample(th.zeros(2, 3))


def test_random_actions_are_uniform_over_available():
    th.manual_seed(1)
    selector = EpsilonGreedyActionSelector(make_args())
    avail = th.tensor([[[1, 0, 1, 0, 1]]]).expand(20000, 1, 5)
    qs = th.zeros(20000, 1, 5)
    counts = th.bincount(selector.select_action(qs, avail, t_env=0).flatten(), minlength=5)
    assert counts[1] == 0 and counts[3] == 0
    assert ((counts[[0, 2, 4]].float() / 20000 - 1 / 3).abs() < 0.02).all(), counts


def test_epsilon_mixes_random_and_greedy():
    th.manual_seed(2)
    selector = EpsilonGreedyActionSelector(make_args())
    qs = th.tensor([0.0, 0.0, 1.0, 0.0]).expand(40000, 1, 4)
    avail = th.ones(40000, 1, 4)
    actions = selector.select_action(qs, avail, t_env=50000)  # epsilon 0.525
    assert selector.epsilon == pytest.approx(0.525)
    # P(greedy action 2) = 1 - eps + eps / 4
    assert (actions == 2).float().mean().item() == pytest.approx(1 - 0.525 * 0.75, abs=0.01)


def test_test_mode_is_greedy():
    th.manual_seed(3)
    selector = EpsilonGreedyActionSelector(make_args())
    qs = th.randn(500, 3, 6)
    avail = random_avail(500, 3, 6)
    actions = selector.select_action(qs, avail, t_env=0, test_mode=True)
    assert selector.epsilon == 0.0
    expected = qs.masked_fill(avail == 0, -math.inf).argmax(-1)
    assert th.equal(actions, expected)
    # Back in training mode the schedule applies again.
    selector.select_action(qs, avail, t_env=0)
    assert selector.epsilon == 1.0


def test_greedy_selection_moves_the_random_state_as_pymarl2s_draws_do():
    """With epsilon 0 no random action is built, but the random stream moves on exactly as PyMARL2's
    rand + Categorical draw move it, so that every later draw is the same."""
    qs, avail = th.randn(5, 3, 6), random_avail(5, 3, 6)
    th.manual_seed(4)
    th.rand(5, 3)
    Categorical(probs=avail.float(), validate_args=False).sample()
    after = th.rand(8)
    th.manual_seed(4)
    actions = EpsilonGreedyActionSelector(make_args()).select_action(qs, avail, t_env=0, test_mode=True)
    assert th.equal(actions, qs.masked_fill(avail == 0, -math.inf).argmax(-1))
    assert th.equal(th.rand(8), after)


def test_test_noise_sets_test_epsilon():
    selector = EpsilonGreedyActionSelector(make_args(test_noise=0.3))
    selector.select_action(th.zeros(1, 1, 2), th.ones(1, 1, 2), t_env=0, test_mode=True)
    assert selector.epsilon == 0.3


def test_linear_schedule_values():
    schedule = DecayThenFlatSchedule(1.0, 0.05, 100000, decay="linear")
    assert schedule.eval(0) == 1.0
    assert schedule.eval(50000) == pytest.approx(0.525)
    assert schedule.eval(100000) == pytest.approx(0.05)
    assert schedule.eval(10**7) == 0.05
    assert DecayThenFlatSchedule(1.0, 0.05, 100000).eval(25000) == pytest.approx(0.7625)  # linear default


def test_exp_schedule_values():
    schedule = DecayThenFlatSchedule(1.0, 0.05, 100000, decay="exp")
    assert schedule.eval(0) == 1.0
    assert schedule.eval(50000) == pytest.approx(math.sqrt(0.05))  # halfway in log space
    assert schedule.eval(100000) == pytest.approx(0.05)
    assert schedule.eval(10**7) == 0.05
    # The curve starts at 1, so a lower start clips the early part.
    assert DecayThenFlatSchedule(0.5, 0.05, 100000, decay="exp").eval(10000) == 0.5


@pytest.mark.parametrize("decay", ["linear", "exp"])
def test_a_flat_schedule_of_one_explores_throughout(decay):
    """epsilon_start = epsilon_finish = 1: the uniform data of the matrix-game studies (QTRAN, WQMIX, QPLEX)."""
    schedule = DecayThenFlatSchedule(1.0, 1.0, 100000, decay=decay)
    assert [schedule.eval(t) for t in (0, 50000, 10**7)] == [1.0, 1.0, 1.0]


def test_schedule_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown decay 'cosine'"):
        DecayThenFlatSchedule(1.0, 0.05, 100, decay="cosine")
    with pytest.raises(ValueError, match="time_length"):
        DecayThenFlatSchedule(1.0, 0.05, 0)
