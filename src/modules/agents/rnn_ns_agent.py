"""EPyMARL's non-shared agent (``agent: rnn_ns``, its ``_ns`` configs): every agent its own network of the
rnn agent's shape (fc1 → ReLU → GRU, or with use_rnn=False a ReLU layer → fc2), all agents' networks held
as one stack of weights and run together (AgentLinear: a batched matmul over the agent dimension), not
as a Python loop over agents as EPyMARL runs them."""
import math
from types import SimpleNamespace

import torch as th
import torch.nn as nn
import torch.nn.functional as F


class AgentLinear(nn.Module):
    """n_agents independent Linear layers: x [..., n_agents, in] → [..., n_agents, out], agent i through
    its own weight [in, out] and bias; each initialised as torch initialises an nn.Linear."""

    def __init__(self, n_agents: int, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(th.empty(n_agents, in_features, out_features))  # [n, in, out]
        self.bias = nn.Parameter(th.empty(n_agents, out_features))  # [n, out]
        bound = 1 / math.sqrt(in_features)
        for agent_id in range(n_agents):
            nn.init.kaiming_uniform_(self.weight[agent_id].T, a=math.sqrt(5))  # as nn.Linear's [out, in]
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: th.Tensor) -> th.Tensor:
        return th.einsum("...ni,nio->...no", x, self.weight) + self.bias


def gru_step(x: th.Tensor, h: th.Tensor | None, input_layer: nn.Module, memory_layer: nn.Module) -> th.Tensor:
    """One GRUCell step (its gate order r, z, n) with the input and memory transforms given as layers (each
    [..., hidden] -> [..., 3 * hidden]; AgentLinear for a network per agent): the new memory from features
    x [..., hidden] and the memory before (None: zeros)."""
    h = x.new_zeros(x.shape) if h is None else h
    x_r, x_z, x_n = input_layer(x).chunk(3, dim=-1)
    h_r, h_z, h_n = memory_layer(h).chunk(3, dim=-1)
    reset, update = th.sigmoid(x_r + h_r), th.sigmoid(x_z + h_z)
    candidate = th.tanh(x_n + reset * h_n)
    return (1 - update) * candidate + update * h


class RNNNSAgent(nn.Module):
    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.hidden_dim = args.rnn_hidden_dim
        self.recurrent = getattr(args, "use_rnn", True)
        n, hidden = self.n_agents, self.hidden_dim
        self.fc1 = AgentLinear(n, input_shape, hidden)
        # the GRU's input and memory transforms (3 gates each, GRUCell's order r, z, n), or a ReLU layer
        self.rnn = AgentLinear(n, hidden, 3 * hidden if self.recurrent else hidden)
        self.rnn_hidden = AgentLinear(n, hidden, 3 * hidden) if self.recurrent else None
        self.fc2 = AgentLinear(n, hidden, args.n_actions)

    def init_hidden(self) -> th.Tensor:
        """Zero memory: [1, hidden] (the controller expands it to [bs, n_agents, hidden])."""
        return self.fc1.weight.new_zeros(1, self.hidden_dim)

    def _step(self, x: th.Tensor, h: th.Tensor | None) -> th.Tensor:
        """The new memory from features x [..., n_agents, hidden] and the memory before (None: zeros)."""
        if not self.recurrent:
            return F.relu(self.rnn(x))
        return gru_step(x, h, self.rnn, self.rnn_hidden)

    def forward(self, inputs: th.Tensor, hidden_state: th.Tensor | None = None) -> tuple[th.Tensor, th.Tensor]:
        """inputs [bs, n_agents, input] (or [bs*n_agents, input]), hidden_state likewise → (q [..., n_actions],
        new hidden [..., hidden]) with the leading dims of inputs."""
        leading = inputs.shape[:-1]
        x = F.relu(self.fc1(inputs.reshape(-1, self.n_agents, inputs.shape[-1])))  # [bs, n, hidden]
        if hidden_state is not None:
            hidden_state = hidden_state.reshape(x.shape)
        h = self._step(x, hidden_state)  # [bs, n, hidden]
        return self.fc2(h).reshape(*leading, -1), h.reshape(*leading, -1)

    def forward_sequence(self, inputs: th.Tensor, hidden_state: th.Tensor | None = None) -> th.Tensor:
        """inputs [bs, T, n_agents, input] → q [bs, T, n_agents, n_actions]: what T calls of forward give."""
        x = F.relu(self.fc1(inputs))  # [bs, T, n, hidden]
        if not self.recurrent:
            return self.fc2(self._step(x, None))
        h, memories = hidden_state, []
        for t in range(x.shape[1]):
            h = self._step(x[:, t], h)  # [bs, n, hidden]
            memories.append(h)
        return self.fc2(th.stack(memories, dim=1))  # [bs, T, n, n_actions]

    def forward_sequence_pair(self, other: "RNNNSAgent", inputs: th.Tensor, with_memory: bool = False) -> tuple:
        """forward_sequence of this agent and (without gradients) of `other`; memories are not kept."""
        if with_memory:
            raise ValueError("the rnn_ns agent does not return its memories (with_memory)")
        with th.no_grad():
            other_q = other.forward_sequence(inputs)
        return self.forward_sequence(inputs), other_q
