"""NQLearner: hand-checked stats on a table-valued controller, learning on a fixed batch with
the real n_mac, target-network update schedule, IQL/VDN/QMIX variants, the fused unroll against
the step-wise one, bfloat16 training and save/load."""
import copy
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch as th
import torch.nn as nn

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from learners import REGISTRY as learner_REGISTRY
from learners.q_learner import UNROLLS, valid_step_mask
from run.run import build_scheme
from utils import th_utils

th.set_num_threads(1)

N_AGENTS = 3
N_ACTIONS = 4
OBS_DIM = 5
STATE_DIM = 6
T = 5  # stored steps: episode_limit 4 + the final observation


class FakeConsole:
    def __init__(self):
        self.messages = []

    def info(self, message):
        self.messages.append(message)


class FakeLogger:
    def __init__(self):
        self.stats = defaultdict(list)  # key -> [(t, value)]
        self.console_logger = FakeConsole()

    def log_stat(self, key, value, t, to_sacred=True):
        self.stats[key].append((t, float(value)))


def make_args(**overrides) -> SimpleNamespace:
    args = dict(
        n_agents=N_AGENTS, n_actions=N_ACTIONS, state_shape=STATE_DIM, obs_shape=OBS_DIM,
        episode_limit=T - 1, device="cpu", use_cuda=False, env="null",
        agent="n_rnn", mac="n_mac", rnn_hidden_dim=16, obs_last_action=True, obs_agent_id=True,
        action_selector="epsilon_greedy", epsilon_start=1.0, epsilon_finish=0.05,
        epsilon_anneal_time=100,
        mixer="qmix", mixing_embed_dim=8, hypernet_embed=16,
        optimizer="adam", lr=0.01, optim_alpha=0.99, optim_eps=1e-5, grad_norm_clip=10,
        gamma=0.99, td_lambda=0.6, q_lambda=False,
        target_update_interval=1000, learner_log_interval=0,
    )
    args.update(overrides)
    return SimpleNamespace(**args)


def make_scheme(n_agents: int, n_actions: int, state_dim: int, obs_dim: int):
    """The training run's fields and compact dtypes (run.build_scheme)."""
    return build_scheme({"n_agents": n_agents, "n_actions": n_actions, "state_shape": state_dim,
                         "obs_shape": obs_dim})


def make_batch(seed: int = 0, n_agents: int = N_AGENTS, state_dim: int = STATE_DIM) -> EpisodeBatch:
    """Episode 0 terminates after 2 transitions; episode 1 is cut by the limit after 4."""
    gen = th.Generator().manual_seed(seed)
    scheme, groups, preprocess = make_scheme(n_agents, N_ACTIONS, state_dim, OBS_DIM)
    batch = EpisodeBatch(scheme, groups, 2, T, preprocess=preprocess)
    for episode, n_steps in ((0, 2), (1, T - 1)):
        avail = th.ones(n_steps + 1, n_agents, N_ACTIONS, dtype=th.int)  # [t, agents, actions]
        avail[:, :, -1] = (th.rand(n_steps + 1, n_agents, generator=gen) < 0.5).int()
        actions = th.randint(0, N_ACTIONS - 1, (n_steps + 1, n_agents, 1), generator=gen)
        terminated = th.zeros(n_steps, 1, dtype=th.uint8)
        terminated[-1] = int(episode == 0)
        batch.update({"state": th.randn(n_steps + 1, state_dim, generator=gen),
                      "obs": th.randn(n_steps + 1, n_agents, OBS_DIM, generator=gen),
                      "avail_actions": avail, "actions": actions}, bs=episode, ts=slice(0, n_steps + 1))
        batch.update({"reward": th.rand(n_steps, 1, generator=gen), "terminated": terminated},
                     bs=episode, ts=slice(0, n_steps))
    return batch


def build_learner(name: str, args: SimpleNamespace, common_reward: bool = True) -> tuple:
    """(learner `name` with its controller args.mac on the test env's fields, its FakeLogger); a reward per
    agent without common_reward."""
    scheme, groups, preprocess = build_scheme({"n_agents": N_AGENTS, "n_actions": N_ACTIONS,
                                               "state_shape": STATE_DIM, "obs_shape": OBS_DIM},
                                              common_reward=common_reward)
    scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme  # the buffer's, with "filled"
    mac = mac_REGISTRY[args.mac](scheme, groups, args)
    logger = FakeLogger()
    return learner_REGISTRY[name](mac, scheme, logger, args), logger


def make_learner(seed: int = 0, **overrides):
    th.manual_seed(seed)
    return build_learner("nq_learner", make_args(**overrides))


# --- hand-checked single step ------------------------------------------------------------

class TableAgent(nn.Module):
    """Q-values read from a table [T, n_agents, n_actions], whatever the inputs."""

    def __init__(self, table):
        super().__init__()
        self.q = nn.Parameter(th.tensor(table))


class TableMAC:
    def __init__(self, table):
        self.agent = TableAgent(table)

    def init_hidden(self, batch_size):
        self.batch_size = batch_size

    def forward(self, batch, t, test_mode=False):
        return self.agent.q[t].expand(self.batch_size, -1, -1)  # [bs, n_agents, n_actions]

    def forward_sequence(self, batch):
        return self.agent.q.expand(batch.batch_size, -1, -1, -1)  # [bs, T, n_agents, n_actions]

    def forward_sequence_pair(self, other, batch):
        with th.no_grad():
            other_out = other.forward_sequence(batch)
        return self.forward_sequence(batch), other_out

    def parameters(self):
        return self.agent.parameters()

    def load_state(self, other):
        self.agent.load_state_dict(other.agent.state_dict())


@pytest.mark.parametrize("train_unroll", UNROLLS)
def test_single_step_stats_by_hand(train_unroll):
    # 2 agents, 2 actions, 3 stored steps (2 transitions), truncated episode, VDN, gamma = lambda = 0.5.
    online = [[[1.0, 2.0], [3.0, 0.0]],
              [[2.0, 5.0], [1.0, 4.0]],
              [[6.0, 1.0], [0.0, 2.0]]]
    target = [[[0.0, 0.0], [0.0, 0.0]],
              [[10.0, 20.0], [30.0, 40.0]],
              [[50.0, 60.0], [70.0, 80.0]]]
    args = make_args(n_agents=2, n_actions=2, mixer="vdn", gamma=0.5, td_lambda=0.5, optimizer="rmsprop",
                     train_unroll=train_unroll)
    logger = FakeLogger()
    learner = learner_REGISTRY["nq_learner"](TableMAC(online), {}, logger, args)
    learner.target_mac.agent.q.data = th.tensor(target)

    scheme, groups, preprocess = make_scheme(2, 2, 1, 1)
    batch = EpisodeBatch(scheme, groups, 1, 3, preprocess=preprocess)
    avail = th.ones(3, 2, 2, dtype=th.int)
    avail[1, 1, 1] = 0  # agent 1 cannot take action 1 at t=1
    batch.update({"state": th.zeros(3, 1), "obs": th.zeros(3, 2, 1), "avail_actions": avail,
                  "actions": th.tensor([[[1], [0]], [[0], [0]], [[0], [0]]])}, ts=slice(0, 3))
    batch.update({"reward": th.tensor([[1.0], [2.0]]), "terminated": th.zeros(2, 1)}, ts=slice(0, 2))

    learner.train(batch, t_env=7, episode_num=1)

    # Chosen Q_tot (VDN): t0 = 2 + 3 = 5, t1 = 2 + 1 = 3.
    # Double Q: online argmax, target value. t1: agent0 argmax 1 (5 > 2) -> 20; agent1 argmax
    # over available {0} -> 30 (not 40); sum 50. t2: agent0 argmax 0 -> 50, agent1 argmax 1 -> 80; sum 130.
    # lambda-returns: G2 = 130 (truncated), G1 = 0.25 * 130 + (2 + 0.25 * 130) = 67,
    # G0 = 0.25 * 67 + (1 + 0.25 * 50) = 30.25.
    # td = [5 - 30.25, 3 - 67] = [-25.25, -64]; loss = 0.5 * (25.25^2 + 64^2) / 2 = 1183.390625.
    # dloss/dQ_tot_t = td_t / 2 flows to both chosen entries: grad norm = sqrt(2 * 12.625^2 + 2 * 32^2).
    stats = {key: values[-1] for key, values in logger.stats.items()}
    assert stats["loss_td"] == (7, pytest.approx(1183.390625))
    assert stats["td_error_abs"] == (7, pytest.approx((25.25 + 64) / 2))
    assert stats["q_taken_mean"] == (7, pytest.approx((5 + 3) / (2 * 2)))
    assert stats["target_mean"] == (7, pytest.approx((30.25 + 67) / (2 * 2)))
    assert stats["grad_norm"] == (7, pytest.approx(math.sqrt(2 * 12.625 ** 2 + 2 * 32 ** 2)))


def one_transition_learner(learner_name: str, **overrides):
    """The hand-checked data above (2 agents, 2 actions, VDN, gamma 0.5) for `learner_name`: (learner,
    logger, batch)."""
    online = [[[1.0, 2.0], [3.0, 0.0]], [[2.0, 5.0], [1.0, 4.0]], [[6.0, 1.0], [0.0, 2.0]]]
    target = [[[0.0, 0.0], [0.0, 0.0]], [[10.0, 20.0], [30.0, 40.0]], [[50.0, 60.0], [70.0, 80.0]]]
    args = make_args(**{"n_agents": 2, "n_actions": 2, "mixer": "vdn", "gamma": 0.5, "td_lambda": 0.5,
                        "optimizer": "rmsprop", **overrides})
    logger = FakeLogger()
    learner = learner_REGISTRY[learner_name](TableMAC(online), {}, logger, args)
    learner.target_mac.agent.q.data = th.tensor(target)
    scheme, groups, preprocess = make_scheme(2, 2, 1, 1)
    batch = EpisodeBatch(scheme, groups, 1, 3, preprocess=preprocess)
    avail = th.ones(3, 2, 2, dtype=th.int)
    avail[1, 1, 1] = 0
    batch.update({"state": th.zeros(3, 1), "obs": th.zeros(3, 2, 1), "avail_actions": avail,
                  "actions": th.tensor([[[1], [0]], [[0], [0]], [[0], [0]]])}, ts=slice(0, 3))
    batch.update({"reward": th.tensor([[1.0], [2.0]]), "terminated": th.zeros(2, 1)}, ts=slice(0, 2))
    return learner, logger, batch


@pytest.mark.parametrize("double_q, second_target", [(True, 50 + 80), (False, 60 + 80)])
def test_q_learner_one_step_targets_by_hand(double_q, second_target):
    # q_learner: y_t = r_t + gamma * Q'_tot(t+1, greedy). t+1 = 1: agent 0 -> 20 (online argmax 1; the
    # target's own max is 20 too), agent 1 -> 30 (action 1 unavailable): 50. t+1 = 2: double Q takes the
    # online argmax (agent 0: action 0 -> 50, agent 1: action 1 -> 80), else the target maximum (60, 80).
    learner, logger, batch = one_transition_learner("q_learner", double_q=double_q)
    learner.train(batch, t_env=7, episode_num=1)
    targets = [1 + 0.5 * 50, 2 + 0.5 * second_target]
    td = [5 - targets[0], 3 - targets[1]]
    stats = {key: values[-1][1] for key, values in logger.stats.items()}
    assert stats["loss_td"] == pytest.approx(0.5 * (td[0] ** 2 + td[1] ** 2) / 2)
    assert stats["td_error_abs"] == pytest.approx((abs(td[0]) + abs(td[1])) / 2)
    assert stats["target_mean"] == pytest.approx(sum(targets) / 4)


def test_nq_learner_honours_double_q_false():
    # TD(lambda) on the target maximum: G2 = 60 + 80 = 140, G1 = 0.25 * 140 + (2 + 0.25 * 140) = 72,
    # G0 = 0.25 * 72 + (1 + 0.25 * 50) = 31.5 (PyMARL2's nq_learner ignores double_q and always uses double Q).
    learner, logger, batch = one_transition_learner("nq_learner", double_q=False)
    learner.train(batch, t_env=7, episode_num=1)
    assert logger.stats["target_mean"][-1][1] == pytest.approx((31.5 + 72) / 4)


@pytest.mark.parametrize("learner_name, mixer_class", [("q_learner", "OriginalQMixer"), ("nq_learner", "QMixer")])
def test_mixer_qmix_is_each_learners_pymarl2_mixer(learner_name, mixer_class):
    th.manual_seed(0)
    args = make_args()
    scheme, groups, preprocess = make_scheme(N_AGENTS, N_ACTIONS, STATE_DIM, OBS_DIM)
    scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme
    learner = learner_REGISTRY[learner_name](mac_REGISTRY["basic_mac"](scheme, groups, args), scheme, FakeLogger(), args)
    assert type(learner.mixer).__name__ == mixer_class


def test_the_matrix_game_logs_the_learned_joint_action_values():
    # VDN at the first step: Q_tot(a0, a1) = online[0][0][a0] + online[0][1][a1] = [[4, 1], [5, 2]].
    learner, logger, batch = one_transition_learner("nq_learner", env="one_step_matrix_game", lr=0.0)
    learner.train(batch, t_env=0, episode_num=0)
    (table,) = [message for message in logger.console_logger.messages if message.startswith("Joint-action")]
    assert table.splitlines()[1:3] == ["[[4.0 1.0]", " [5.0 2.0]]"]
    assert "Agents' Q-values (rows: agents), mean over the batch:" in table


# --- learning with the real controller ---------------------------------------------------

def losses_over_training(n_steps: int = 15, **overrides):
    learner, logger = make_learner(**overrides)
    batch = make_batch()
    for step in range(n_steps):
        learner.train(batch, t_env=step, episode_num=step)
    return [value for _, value in logger.stats["loss_td"]], logger


def all_params(learner) -> list:
    """The online and the target networks' parameters."""
    targets = list(learner.target_mac.parameters())
    if learner.target_mixer is not None:
        targets += list(learner.target_mixer.parameters())
    return learner.params + targets


@pytest.mark.parametrize("overrides", [
    {"mixer": "qmix"},
    {"mixer": "qmix", "q_lambda": True},
    {"mixer": "vdn"},
    {"mixer": None},
    {"mixer": "qmix", "optimizer": "rmsprop"},
], ids=["qmix", "qmix-q_lambda", "vdn", "iql", "qmix-rmsprop"])
def test_training_reduces_the_loss_on_a_fixed_batch(overrides):
    losses, logger = losses_over_training(**overrides)
    assert len(losses) == 15
    assert all(math.isfinite(loss) for loss in losses)
    assert losses[-1] < 0.5 * losses[0]
    assert set(logger.stats) == {"loss_td", "grad_norm", "td_error_abs", "q_taken_mean", "target_mean"}


def test_stats_are_logged_every_learner_log_interval():
    learner, logger = make_learner(learner_log_interval=100)
    batch = make_batch()
    for t_env in (0, 50, 99, 100, 150, 201):
        learner.train(batch, t_env=t_env, episode_num=0)
    # First call always logs (log_stats_t starts at -interval - 1), then every >= 100 steps.
    assert [t for t, _ in logger.stats["loss_td"]] == [0, 100, 201]


def test_iql_targets_are_per_agent():
    learner, _ = make_learner(mixer=None)
    batch = make_batch()
    mac_out, target_mac_out = learner._unroll(batch)  # [2, T, n_agents, n_actions] each
    targets = learner._targets(batch, mac_out, target_mac_out, learner._transitions(batch))
    assert learner.mixer is None and learner.target_mixer is None
    assert targets.shape == (2, T - 1, N_AGENTS)
    # Episode 0 terminated at t=1: its later targets are exactly 0.
    assert th.count_nonzero(targets[0, 2:]) == 0


def test_valid_step_mask_drops_steps_after_termination():
    batch = make_batch()
    mask = valid_step_mask(batch, batch["terminated"][:, :-1].float())
    # Episode 0: transitions 0, 1 (terminal); its final observation at t=2 is filled but not a transition.
    assert mask[:, :, 0].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["filled"][0, :, 0].tolist() == [1, 1, 1, 0, 0]  # the batch itself is untouched


# --- fused vs step-wise unroll, bfloat16 ---------------------------------------------------------

def train_run(n_steps: int = 6, **overrides) -> tuple:
    """(learner, losses, grad norms) after n_steps train calls cycling over 3 random batches, with
    target refreshes every 2 episodes."""
    learner, logger = make_learner(target_update_interval=2, **overrides)
    batches = [make_batch(seed) for seed in range(3)]
    for step in range(n_steps):
        learner.train(batches[step % 3], t_env=step, episode_num=step)
    return learner, [v for _, v in logger.stats["loss_td"]], [v for _, v in logger.stats["grad_norm"]]


@pytest.mark.parametrize("overrides", [
    {"mixer": "qmix"},
    {"mixer": "qmix", "q_lambda": True},
    {"mixer": "vdn"},
    {"mixer": None},
    {"mixer": None, "q_lambda": True, "use_layer_norm": True},
], ids=["qmix", "qmix-q_lambda", "vdn", "iql", "iql-q_lambda-layer_norm"])
def test_fused_and_stepwise_unroll_train_alike(overrides):
    fused, fused_losses, fused_norms = train_run(train_unroll="fused", **overrides)
    stepwise, stepwise_losses, stepwise_norms = train_run(train_unroll="stepwise", **overrides)
    assert fused_losses == pytest.approx(stepwise_losses, rel=1e-5)
    assert fused_norms == pytest.approx(stepwise_norms, rel=1e-5)
    for a, b in zip(all_params(fused), all_params(stepwise), strict=True):
        assert th.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_bf16_training_runs_close_to_float32():
    _, float_losses, float_norms = train_run()
    learner, bf16_losses, bf16_norms = train_run(train_precision="bfloat16")
    assert all(p.dtype == th.float32 for p in learner.params)  # autocast: the weights stay float32
    assert bf16_losses != float_losses  # bfloat16 did run
    assert bf16_losses == pytest.approx(float_losses, rel=0.05)
    assert bf16_norms == pytest.approx(float_norms, rel=0.05)


# --- target network schedule ---------------------------------------------------------------

def same_weights(module_a, module_b) -> bool:
    return all(th.equal(a, b) for a, b in zip(module_a.state_dict().values(), module_b.state_dict().values()))


def test_targets_update_every_target_update_interval_episodes():
    learner, logger = make_learner(target_update_interval=16)
    batch = make_batch()
    synced_at = []
    for episode_num in range(0, 64, 8):  # as run.py counts: += batch_size_run (8) per loop
        learner.train(batch, t_env=episode_num, episode_num=episode_num)
        if same_weights(learner.mac.agent, learner.target_mac.agent):
            assert same_weights(learner.mixer, learner.target_mixer)
            synced_at.append(episode_num)
    # (episode - last_update) / 16 >= 1: at 16, 32 and 48 (an exact multiple counts).
    assert synced_at == [16, 32, 48]
    assert learner.last_target_update_episode == 48
    assert logger.console_logger.messages.count("Updated target network") == 3


# --- persistence -----------------------------------------------------------------------------

@pytest.mark.parametrize("mixer", ["qmix", None])
def test_save_load_round_trip(tmp_path, mixer):
    trained, _ = make_learner(seed=0, mixer=mixer)
    batch = make_batch()
    for step in range(3):
        trained.train(batch, t_env=step, episode_num=step)
    trained.save_models(str(tmp_path))
    assert (tmp_path / "mixer.th").exists() == (mixer is not None)
    assert (tmp_path / "opt.th").exists()

    restored, _ = make_learner(seed=1, mixer=mixer)
    assert not same_weights(restored.mac.agent, trained.mac.agent)
    restored.load_models(str(tmp_path))
    assert same_weights(restored.mac.agent, trained.mac.agent)
    assert same_weights(restored.target_mac.agent, trained.mac.agent)
    if mixer is not None:
        assert same_weights(restored.mixer, trained.mixer)
        assert same_weights(restored.target_mixer, trained.mixer)

    # Optimiser state (Adam moments) came back too: the next step is identical.
    trained.target_mac.load_state(trained.mac)
    if mixer is not None:
        trained.target_mixer.load_state_dict(trained.mixer.state_dict())
    for learner in (trained, restored):
        learner.train(copy.deepcopy(batch), t_env=10, episode_num=3)
    assert same_weights(restored.mac.agent, trained.mac.agent)


# --- bad configuration ---------------------------------------------------------------------

def test_unknown_mixer_is_rejected():
    with pytest.raises(ValueError, match="unknown mixer 'qmx'"):
        make_learner(mixer="qmx")


def test_unknown_optimizer_is_rejected():
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        make_learner(optimizer="sgd")


def test_unknown_train_unroll_is_rejected():
    with pytest.raises(ValueError, match="unknown train_unroll 'loop'"):
        make_learner(train_unroll="loop")


def test_unknown_train_precision_is_rejected():
    with pytest.raises(ValueError, match="^train_precision='bf16' is not one of auto, float32, bfloat16: auto uses"):
        make_learner(train_precision="bf16")


@pytest.mark.parametrize("precision, device, flag, expected", [
    ("auto", "cpu", "avx512_bf16", ("bfloat16", "auto: this CPU has avx512_bf16")),
    ("auto", "cpu", None, ("float32", "auto: this CPU has no native bfloat16 instructions")),
    ("auto", "cuda", "avx512_bf16", ("float32", "auto: bfloat16 is untested on cuda")),
    ("float32", "cpu", "avx512_bf16", ("float32", "set by train_precision")),
    ("bfloat16", "cpu", None, ("bfloat16", "set by train_precision")),
])
def test_train_precision_resolves_by_cpu(precision, device, flag, expected, monkeypatch):
    monkeypatch.setattr(th_utils, "cpu_bf16_flag", lambda: flag)
    assert th_utils.resolve_train_precision(precision, device) == expected


def test_the_cpu_bf16_flag_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 avx512_bf16\n\nprocessor\t: 1\n")
    assert th_utils.cpu_bf16_flag(str(cpuinfo)) == "avx512_bf16"
    cpuinfo.write_text("flags\t\t: fpu sse2 avx2\n")
    assert th_utils.cpu_bf16_flag(str(cpuinfo)) is None
    assert th_utils.cpu_bf16_flag(str(tmp_path / "missing")) is None


def test_the_learner_logs_its_precision():
    learner, logger = make_learner(train_precision="bfloat16")
    assert learner.bf16 and "Training step matmuls in bfloat16 (set by train_precision)" in logger.console_logger.messages
