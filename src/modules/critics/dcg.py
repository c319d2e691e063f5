"""The deep coordination graph critic of EPyMARL's PAC-DCG (critic_type ``pac_dcg_critic_ns``; ``pac_dcg_critic``
with shared weights), after Boehmer, Kurin and Whiteson, "Deep Coordination Graphs" (ICML 2020), as
EPyMARL's modules/critics/pac_dcg_ns.py computes it.

The joint action's value is a sum over a graph of agents (cg_edges: 'vdn' none, 'line', 'cycle', 'star',
'full', a number of random edges, or a list of [i, j] pairs):

    Q(s, u) = 1/n sum_i f_i(u_i | h_i) + 1/|E| sum_{(i,j) in E} f_ij(u_i, u_j | h_i, h_j)

where h_i is agent i's memory of the states so far (its own encoder: a ReLU layer of hidden_dim, then a GRU;
every agent reads the state), f_i its utility of each action (a network of cg_utilities_hidden_dim hidden
layers) and f_ij the edge's payoff matrix [n_actions, n_actions] from [h_i, h_j], averaged with the same
network's transposed output of [h_j, h_i] (a matrix of rank cg_payoff_rank when that is set). ``greedy``
looks for the joint action of highest value by max-sum message passing (msg_iterations passes, messages
normalised with msg_normalized, the best joint action seen kept with msg_anytime; unavailable actions never
chosen): exact on a graph without cycles, an approximation on one with them. With ``pac_dcg_critic_ns`` every agent's encoder and utility, and every edge's payoff, have their
own weights (AgentLinear: one batched matmul, not a loop over agents as EPyMARL's); with ``pac_dcg_critic``
one network serves all, the encoder told agents apart by their one-hot id (DCG's own design).

Differences from EPyMARL: the encoders run over a whole batch of episodes at once (EPyMARL runs them step by
step, once per query); a number of random edges may be at most n(n-1)/2 (EPyMARL's check, (n-1)!, lets a
number through that no graph can have) and is drawn from the run's seed; the edges are saved with the
weights, so that a checkpoint's payoffs stay on their edges."""
import random
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch
from modules.agents.rnn_ns_agent import AgentLinear, gru_step

GRAPHS = ("vdn", "line", "cycle", "star", "full")


def graph_edges(spec: str | int | list, n_agents: int, seed: int) -> list[tuple[int, int]]:
    """cg_edges as the list of edges (i, j): a graph's name, a number of random edges, or the edges given."""
    n = n_agents
    named = {"vdn": [], "line": [(i, i + 1) for i in range(n - 1)],
             "cycle": [(i, (i + 1) % n) for i in range(n)] if n > 1 else [],  # 2 agents: both ways, as EPyMARL
             "star": [(0, i) for i in range(1, n)],
             "full": [(i, j) for i in range(n) for j in range(i + 1, n)]}
    if isinstance(spec, str) and spec in named:
        return named[spec]
    if isinstance(spec, int) and not isinstance(spec, bool) and 0 <= spec <= len(named["full"]):
        return sorted(random.Random(seed).sample(named["full"], spec))
    if isinstance(spec, (list, tuple)) and all(_is_edge(edge, n) for edge in spec):
        return [tuple(edge) for edge in spec]
    raise ValueError(f"cg_edges={spec!r}: give one of {', '.join(GRAPHS)}, a number of random edges from 0 to "
                     f"{len(named['full'])}, or a list of [i, j] pairs of agents 0..{n - 1}")


def _is_edge(edge: object, n_agents: int) -> bool:
    return (isinstance(edge, (list, tuple)) and len(edge) == 2 and all(isinstance(i, int) for i in edge)
            and edge[0] != edge[1] and all(0 <= i < n_agents for i in edge))


def _hidden_dims(name: str, spec: int | list | None) -> list[int]:
    """cg_utilities_hidden_dim / cg_payoffs_hidden_dim (`name`): None (no hidden layer), a width, or a list of
    widths; ValueError for a width that is not a positive whole number."""
    widths = [] if spec is None else [spec] if isinstance(spec, int) else list(spec)
    if not all(isinstance(width, int) and not isinstance(width, bool) and width > 0 for width in widths):
        raise ValueError(f"{name}={spec!r}: give a positive width, a list of them, or null (no hidden layer)")
    return widths


def _linear(copies: int | None, in_features: int, out_features: int) -> nn.Module:
    """One Linear layer (copies None: shared), or `copies` independent ones run together (AgentLinear)."""
    return nn.Linear(in_features, out_features) if copies is None else AgentLinear(copies, in_features, out_features)


def _mlp(copies: int | None, in_features: int, hidden: list[int], out_features: int) -> nn.Sequential:
    """Linear layers of the `hidden` widths with ReLUs between them (copies as _linear)."""
    widths = [in_features, *hidden]
    layers = []
    for width_in, width_out in zip(widths[:-1], widths[1:]):
        layers += [_linear(copies, width_in, width_out), nn.ReLU()]
    return nn.Sequential(*layers, _linear(copies, widths[-1], out_features))


class DCGCritic(nn.Module):
    """Utilities and payoffs of a coordination graph over the agents' memories of the state (see above)."""

    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False):
        super().__init__()
        n, n_actions, hidden = args.n_agents, args.n_actions, args.hidden_dim
        self.n_agents, self.n_actions, self.per_agent, self.args = n, n_actions, per_agent, args
        edges = graph_edges(args.cg_edges, n, args.seed)
        self.register_buffer("edges_from", th.tensor([i for i, _ in edges], dtype=th.long))  # [E]
        self.register_buffer("edges_to", th.tensor([j for _, j in edges], dtype=th.long))  # [E]
        rank = args.cg_payoff_rank
        self.payoff_rank = rank if isinstance(rank, int) and rank > 0 else None
        agents, n_edges = (n, len(edges)) if per_agent else (None, None)
        state_dim = int(np.prod(scheme["state"]["vshape"]))
        self.fc1 = _linear(agents, state_dim + (0 if per_agent else n), hidden)
        self.rnn = _linear(agents, hidden, 3 * hidden)  # the GRU's input transform (gates r, z, n)
        self.rnn_hidden = _linear(agents, hidden, 3 * hidden)  # and its memory transform
        self.utility = _mlp(agents, hidden, _hidden_dims("cg_utilities_hidden_dim", args.cg_utilities_hidden_dim),
                            n_actions)
        payoff_out = 2 * self.payoff_rank * n_actions if self.payoff_rank else n_actions ** 2
        self.payoff = _mlp(n_edges, 2 * hidden, _hidden_dims("cg_payoffs_hidden_dim", args.cg_payoffs_hidden_dim),
                           payoff_out)

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's encoder input at every stored step: the state (and, shared, the agent's one-hot id)
        [bs, T, n, input]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        state = batch["state"].reshape(bs, steps, 1, -1).expand(-1, -1, n, -1)  # [bs, T, n, state]
        if self.per_agent:
            return state
        return th.cat([state, th.eye(n, device=batch.device).expand(bs, steps, -1, -1)], dim=-1)

    def forward(self, inputs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """inputs [bs, T, n, input] (one episode's steps in order, memories from zero at the first) ->
        (utilities f_i [bs, T, n, n_actions], payoffs f_ij [bs, T, |E|, n_actions, n_actions])."""
        features = F.relu(self.fc1(inputs))  # [bs, T, n, hidden]
        memory, memories = None, []
        for t in range(features.shape[1]):
            memory = gru_step(features[:, t], memory, self.rnn, self.rnn_hidden)  # [bs, n, hidden]
            memories.append(memory)
        memories = th.stack(memories, dim=1)  # [bs, T, n, hidden]
        return self.utility(memories), self._payoffs(memories)

    def _payoffs(self, memories: th.Tensor) -> th.Tensor:
        """Every edge's payoff matrix, the mean of f([h_i, h_j]) and f([h_j, h_i]) transposed:
        memories [bs, T, n, hidden] -> [bs, T, |E|, n_actions, n_actions]."""
        h_from, h_to = memories[..., self.edges_from, :], memories[..., self.edges_to, :]  # each [bs, T, E, hidden]
        both_ways = th.stack([th.cat([h_from, h_to], dim=-1), th.cat([h_to, h_from], dim=-1)])  # [2, bs, T, E, 2h]
        out = self.payoff(both_ways)  # [2, bs, T, E, payoff_out]
        a = self.n_actions
        if self.payoff_rank:
            bases = out.unflatten(-1, (self.payoff_rank, 2, a))  # [2, bs, T, E, rank, 2, A]
            matrices = (bases[..., 0, :, None] * bases[..., 1, None, :]).sum(dim=-3)  # [2, bs, T, E, A, A]
        else:
            matrices = out.unflatten(-1, (a, a))  # [2, bs, T, E, A, A]
        return (matrices[0] + matrices[1].transpose(-2, -1)) / 2

    def q_values(self, utilities: th.Tensor, payoffs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """Q of joint actions: utilities [..., n, A], payoffs [..., E, A, A], actions [..., k, n] (k joint actions
        each, long) -> [..., k]."""
        k = actions.shape[-2]
        chosen = utilities.unsqueeze(-3).expand(*utilities.shape[:-2], k, -1, -1)  # [..., k, n, A]
        values = chosen.gather(-1, actions.unsqueeze(-1)).squeeze(-1).mean(dim=-1)  # [..., k]
        if len(self.edges_from):
            pairs = actions[..., self.edges_from] * self.n_actions + actions[..., self.edges_to]  # [..., k, E]
            flat = payoffs.flatten(-2).unsqueeze(-3).expand(*pairs.shape, -1)  # [..., k, E, A*A]
            values = values + flat.gather(-1, pairs.unsqueeze(-1)).squeeze(-1).mean(dim=-1)
        return values

    def greedy(self, utilities: th.Tensor, payoffs: th.Tensor, available: th.Tensor) -> th.Tensor:
        """The joint action of highest value by max-sum message passing (EPyMARL's, in float64 as there):
        utilities [..., n, A], payoffs [..., E, A, A], available [..., n, A] -> actions [..., n] (long)."""
        n_edges = len(self.edges_from)
        # an agent with no available action (a padded step) may take any: no -inf row to turn messages to NaN
        unavailable = (available == 0) & (available != 0).any(dim=-1, keepdim=True)
        f_i = (utilities.double() / self.n_agents).masked_fill(unavailable, -float("inf"))  # [..., n, A]
        iterations = self.args.msg_iterations if n_edges else 0
        if iterations <= 0:
            return f_i.argmax(dim=-1)
        f_ij = payoffs.double() / n_edges  # [..., E, A, A]
        utils = f_i
        to_receiver = f_i.new_zeros(*f_i.shape[:-2], n_edges, self.n_actions)  # [..., E, A]: messages to j
        to_sender = th.zeros_like(to_receiver)  # messages to i
        best_value = utilities.new_full(utilities.shape[:-2], -float("inf"))  # [...]
        best_actions = utilities.new_zeros(utilities.shape[:-1], dtype=th.long)  # [..., n]
        for _ in range(iterations):
            # each message: the sender's utility less what the receiver sent it, plus the payoff, maximised
            # over the sender's action
            from_i = (utils[..., self.edges_from, :] - to_sender).unsqueeze(-1) + f_ij  # [..., E, A_i, A_j]
            from_j = (utils[..., self.edges_to, :] - to_receiver).unsqueeze(-1) + f_ij.transpose(-2, -1)
            to_receiver, to_sender = from_i.max(dim=-2)[0], from_j.max(dim=-2)[0]  # each [..., E, A]
            if self.args.msg_normalized:
                to_receiver = to_receiver - to_receiver.mean(dim=-1, keepdim=True)
                to_sender = to_sender - to_sender.mean(dim=-1, keepdim=True)
            received = th.zeros_like(f_i).index_add_(-2, self.edges_to, to_receiver) \
                .index_add_(-2, self.edges_from, to_sender)  # [..., n, A]
            utils = f_i + received
            if self.args.msg_anytime:
                actions = utils.argmax(dim=-1)  # [..., n]
                value = self.q_values(utilities, payoffs, actions.unsqueeze(-2)).squeeze(-1)  # [...]
                better = value > best_value
                best_value = th.where(better, value, best_value)
                best_actions = th.where(better.unsqueeze(-1), actions, best_actions)
        return best_actions if self.args.msg_anytime else utils.argmax(dim=-1)

    def best_responses(self, utilities: th.Tensor, payoffs: th.Tensor, available: th.Tensor,
                       actions: th.Tensor) -> th.Tensor:
        """PAC-DCG's value of each agent's action when the others act greedily: Q(greedy_{-i}, u_i) for every
        agent i, the greedy joint action with i's own action put in. utilities [..., n, A], payoffs
        [..., E, A, A], available [..., n, A], actions [..., n] (long) -> [..., n]."""
        n = self.n_agents
        greedy = self.greedy(utilities, payoffs, available)  # [..., n]
        joint = greedy.unsqueeze(-2).repeat_interleave(n, dim=-2)  # [..., n (i), n]
        own = th.eye(n, dtype=th.bool, device=actions.device)  # [n (i), n]: agent i's own place
        joint = th.where(own, actions.unsqueeze(-2), joint)  # [..., n (i), n]
        return self.q_values(utilities, payoffs, joint)  # [..., n]


class DCGCriticNS(DCGCritic):
    """pac_dcg_critic_ns: every agent its own encoder and utility, every edge its own payoff (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)
