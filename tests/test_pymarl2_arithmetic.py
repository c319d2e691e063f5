"""Issue 12's guarantee: with the default settings the learners compute PyMARL2's arithmetic.

The reference below is PyMARL2's training step written out plainly from its formulas (nq_learner for
qmix.yaml, q_learner for iql.yaml): step-by-step GRUCell unroll, its masking of unavailable actions
with -9999999, the nmix / PyMARL QMixer formulas with bmm, the backward TD(lambda) recursion,
non-foreach Adam and gradient clipping. It starts from the learner's own initial weights, trains on
the same batches, and must log the same losses and end with the same weights.
"""
import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from learners import REGISTRY as learner_REGISTRY
from main import build_config
from run.run import build_scheme

N_AGENTS, N_ACTIONS, OBS_DIM, STATE_DIM, T = 3, 5, 6, 8, 7  # T stored steps: episode_limit 6 + final
N_STEPS = 8  # training steps compared


class Console:
    def info(self, message):
        pass

    warning = info


class StatsLogger:
    def __init__(self):
        self.console_logger = Console()
        self.losses = []

    def log_stat(self, key, value, t, to_sacred=True):
        if key == "loss_td":
            self.losses.append(float(value))


def pymarl2_args(alg: str) -> SimpleNamespace:
    """The merged default.yaml < sc2.yaml < algs/<alg>.yaml config, for a small env."""
    config = build_config([f"--config={alg}", "--env-config=sc2"])
    config.update(n_agents=N_AGENTS, n_actions=N_ACTIONS, state_shape=STATE_DIM, obs_shape=OBS_DIM,
                  episode_limit=T - 1, device="cpu", use_cuda=False, learner_log_interval=0,
                  target_update_interval=2)
    return SimpleNamespace(**config)


def make_batches(n: int, seed: int = 0) -> list:
    """n batches of 4 episodes: two terminated after a random number of steps, two cut by the limit (as a
    runner stores them), with some actions unavailable."""
    gen = th.Generator().manual_seed(seed)
    scheme, groups, preprocess = build_scheme({"n_agents": N_AGENTS, "n_actions": N_ACTIONS,
                                               "state_shape": STATE_DIM, "obs_shape": OBS_DIM})
    batches = []
    for _ in range(n):
        batch = EpisodeBatch(scheme, groups, 4, T, preprocess=preprocess)
        for episode in range(4):
            cut_by_limit = episode % 2 == 1
            steps = T - 1 if cut_by_limit else int(th.randint(2, T, (1,), generator=gen))  # env steps
            avail = (th.rand(steps + 1, N_AGENTS, N_ACTIONS, generator=gen) < 0.7)
            avail[..., 0] = True  # one action is always available, as SMAC's no-op/stop
            actions = th.stack([th.multinomial(a.float(), 1) for a in avail.view(-1, N_ACTIONS)]).view(
                steps + 1, N_AGENTS, 1)
            terminated = th.zeros(steps, 1, dtype=th.bool)
            terminated[-1] = not cut_by_limit
            batch.update({"state": th.randn(steps + 1, STATE_DIM, generator=gen),
                          "obs": th.randn(steps + 1, N_AGENTS, OBS_DIM, generator=gen),
                          "avail_actions": avail, "actions": actions}, bs=episode, ts=slice(0, steps + 1))
            batch.update({"reward": th.randn(steps, 1, generator=gen), "terminated": terminated},
                         bs=episode, ts=slice(0, steps))
        batches.append(batch)
    return batches


# --- PyMARL2's training step, written out ------------------------------------------------------

class RefAgent(nn.Module):
    """PyMARL2's rnn / n_rnn agent (no layer norm): fc1, ReLU, GRUCell, fc2."""

    def __init__(self, input_dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, hidden)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.fc2 = nn.Linear(hidden, N_ACTIONS)

    def forward(self, inputs, hidden):
        h = self.rnn(F.relu(self.fc1(inputs)), hidden)
        return self.fc2(h), h


class RefNMixer(nn.Module):
    """PyMARL2's modules/mixers/nmix.py Mixer (qmix_pos_func abs)."""

    def __init__(self, embed: int, hypernet: int):
        super().__init__()
        self.embed = embed
        self.hyper_w1 = nn.Sequential(nn.Linear(STATE_DIM, hypernet), nn.ReLU(), nn.Linear(hypernet, N_AGENTS * embed))
        self.hyper_b1 = nn.Sequential(nn.Linear(STATE_DIM, embed))
        self.hyper_w2 = nn.Sequential(nn.Linear(STATE_DIM, hypernet), nn.ReLU(), nn.Linear(hypernet, embed))
        self.hyper_b2 = nn.Sequential(nn.Linear(STATE_DIM, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, qvals, states):
        b, t, _ = qvals.size()
        qvals = qvals.reshape(b * t, 1, N_AGENTS)
        states = states.reshape(-1, STATE_DIM)
        w1 = th.abs(self.hyper_w1(states).view(-1, N_AGENTS, self.embed))
        b1 = self.hyper_b1(states).view(-1, 1, self.embed)
        w2 = th.abs(self.hyper_w2(states).view(-1, self.embed, 1))
        b2 = self.hyper_b2(states).view(-1, 1, 1)
        hidden = F.elu(th.matmul(qvals, w1) + b1)
        return (th.matmul(hidden, w2) + b2).view(b, t, -1)


def ref_inputs(batch, t: int) -> th.Tensor:
    """PyMARL2's BasicMAC._build_inputs: obs, last action one-hot (zeros at t=0), agent id."""
    bs = batch.batch_size
    last = th.zeros(bs, N_AGENTS, N_ACTIONS)
    if t > 0:
        last.scatter_(2, batch["actions"][:, t - 1].long(), 1.0)
    ids = th.eye(N_AGENTS).unsqueeze(0).expand(bs, -1, -1)
    return th.cat([batch["obs"][:, t], last, ids], dim=-1)


def ref_unroll(agent: RefAgent, batch) -> th.Tensor:
    """[bs, T, n_agents, n_actions], one GRUCell step at a time from zero memory."""
    hidden = th.zeros(batch.batch_size * N_AGENTS, agent.rnn.hidden_size)
    outs = []
    for t in range(batch.max_seq_length):
        q, hidden = agent(ref_inputs(batch, t).reshape(-1, ref_inputs(batch, t).shape[-1]), hidden)
        outs.append(q.view(batch.batch_size, N_AGENTS, -1))
    return th.stack(outs, dim=1)


def ref_td_lambda(rewards, terminated, mask, target_qs, gamma, td_lambda):
    """PyMARL2's utils/rl_utils.build_td_lambda_targets: the backward recursion."""
    ret = target_qs.new_zeros(*target_qs.shape)
    ret[:, -1] = target_qs[:, -1] * (1 - th.sum(terminated, dim=1))
    for t in range(ret.shape[1] - 2, -1, -1):
        ret[:, t] = td_lambda * gamma * ret[:, t + 1] + mask[:, t] * (
            rewards[:, t] + (1 - td_lambda) * gamma * target_qs[:, t + 1] * (1 - terminated[:, t]))
    return ret[:, 0:-1]


class RefLearner:
    """PyMARL2's nq_learner (`one_step=False`, with the nmix mixer) or q_learner (`one_step=True`, no
    mixer, double Q), started from copies of a marlkit learner's initial weights."""

    def __init__(self, learner, args: SimpleNamespace, one_step: bool):
        self.args, self.one_step = args, one_step
        input_dim = learner.mac.agent.fc1.in_features
        self.agent = RefAgent(input_dim, args.rnn_hidden_dim)
        self.agent.load_state_dict(learner.mac.agent.state_dict())
        self.mixer = None
        if learner.mixer is not None:
            self.mixer = RefNMixer(args.mixing_embed_dim, args.hypernet_embed)
            self.mixer.load_state_dict(learner.mixer.state_dict())
        self.target_agent, self.target_mixer = copy.deepcopy(self.agent), copy.deepcopy(self.mixer)
        self.params = list(self.agent.parameters()) + (list(self.mixer.parameters()) if self.mixer else [])
        self.optimiser = th.optim.Adam(self.params, lr=args.lr, weight_decay=0 if one_step else args.weight_decay,
                                       foreach=False)
        self.last_target_update_episode = 0

    def train(self, batch, episode_num: int) -> float:
        rewards = batch["reward"][:, :-1]
        actions = batch["actions"][:, :-1].long()
        terminated = batch["terminated"][:, :-1].float()
        mask = batch["filled"][:, :-1].float()
        mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])
        avail_actions = batch["avail_actions"].int()

        mac_out = ref_unroll(self.agent, batch)
        chosen = th.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)
        with th.no_grad():
            target_mac_out = ref_unroll(self.target_agent, batch)
            mac_out_detach = mac_out.clone().detach()
            mac_out_detach[avail_actions == 0] = -9999999
            if self.one_step:
                target_mac_out = target_mac_out[:, 1:]
                target_mac_out[avail_actions[:, 1:] == 0] = -9999999
                cur_max_actions = mac_out_detach[:, 1:].max(dim=3, keepdim=True)[1]
                target_max_qvals = th.gather(target_mac_out, 3, cur_max_actions).squeeze(3)
                targets = rewards + self.args.gamma * (1 - terminated) * target_max_qvals
            else:
                cur_max_actions = mac_out_detach.max(dim=3, keepdim=True)[1]
                target_max_qvals = th.gather(target_mac_out, 3, cur_max_actions).squeeze(3)
                target_max_qvals = self.target_mixer(target_max_qvals, batch["state"])
                targets = ref_td_lambda(rewards, terminated, mask, target_max_qvals, self.args.gamma,
                                        self.args.td_lambda)
        if self.mixer is not None:
            chosen = self.mixer(chosen, batch["state"][:, :-1])
        td_error = chosen - targets.detach()
        mask = mask.expand_as(td_error)
        loss = (0.5 * td_error.pow(2) * mask).sum() / mask.sum()
        self.optimiser.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(self.params, self.args.grad_norm_clip)
        self.optimiser.step()
        if (episode_num - self.last_target_update_episode) / self.args.target_update_interval >= 1.0:
            self.target_agent.load_state_dict(self.agent.state_dict())
            if self.mixer is not None:
                self.target_mixer.load_state_dict(self.mixer.state_dict())
            self.last_target_update_episode = episode_num
        return loss.item()


@pytest.mark.parametrize("alg, one_step", [("qmix", False), ("iql", True)])
def test_the_default_learners_compute_pymarl2s_arithmetic(alg, one_step):
    th.manual_seed(0)
    args = pymarl2_args(alg)
    assert args.train_precision == "float32" and args.learner == ("q_learner" if one_step else "nq_learner")
    scheme, groups, preprocess = build_scheme({"n_agents": N_AGENTS, "n_actions": N_ACTIONS,
                                               "state_shape": STATE_DIM, "obs_shape": OBS_DIM})
    scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme
    mac = mac_REGISTRY[args.mac](scheme, groups, args)
    logger = StatsLogger()
    learner = learner_REGISTRY[args.learner](mac, scheme, logger, args)
    reference = RefLearner(learner, args, one_step)

    batches = make_batches(3)
    expected = [reference.train(batches[step % 3], episode_num=step) for step in range(N_STEPS)]
    for step in range(N_STEPS):
        learner.train(batches[step % 3], t_env=step, episode_num=step)

    assert np.all(np.abs(np.array(logger.losses) / np.array(expected) - 1) <= 1e-5), (logger.losses, expected)
    for ours, theirs in zip(learner.params, reference.params, strict=True):
        assert th.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
