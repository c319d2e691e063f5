"""benellis3/mappo's recurrent central state-value critic (``centralV_rnn_critic``, its
src/modules/critics/centralV_rnn_critic.py), which the SMACv2 paper's MAPPO runs: agent i's value V_i(t)
comes from a GRU over its own history of [state_t, its observation o^i_t, its one-hot id] (the id with
obs_agent_id), one network shared by the agents.

The network is an RNNAgent with one output (fc -> ReLU -> GRUCell -> fc, rnn_hidden_dim wide), unrolled
over whole episodes from zero memory, with truncated backpropagation through time every detach_every steps
as benellis3/mappo's critic does. With normalise_obs the state is normalised by running statistics that the
critic keeps (``state_normaliser``, saved with it); the observations come in as the agents see them
(normalised by the controller's statistics).
"""
from types import SimpleNamespace

import torch as th
import torch.nn as nn

from components.episode_buffer import EpisodeBatch
from modules.agents.rnn_agent import RNNAgent
from utils.running_stats import RunningNormaliser

from .state_value import scheme_size


class CentralVRNNCritic(nn.Module):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.with_id = args.obs_agent_id
        self.detach_every = args.detach_every
        state_size = scheme_size(scheme, "state")
        input_size = state_size + scheme_size(scheme, "obs") + self.with_id * self.n_agents
        self.network = RNNAgent(input_size, SimpleNamespace(**{**vars(args), "n_actions": 1}))
        self.state_normaliser = RunningNormaliser(state_size) if args.normalise_obs else None

    def build_inputs(self, batch: EpisodeBatch, obs: th.Tensor) -> th.Tensor:
        """Every agent's input at every stored step [bs, T, n_agents, input] from the batch's states and the
        observations as the agents see them, obs [bs, T, n_agents, obs]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        state = self.normalise_state(batch["state"])  # [bs, T, state]
        parts = [state.unsqueeze(2).expand(-1, -1, n, -1), obs]  # [bs, T, n, state], [bs, T, n, obs]
        if self.with_id:
            parts.append(th.eye(n, device=obs.device).expand(bs, steps, -1, -1))  # [bs, T, n, n]
        return th.cat(parts, dim=-1)

    def normalise_state(self, state: th.Tensor) -> th.Tensor:
        """States [..., state]: normalised with normalise_obs, else unchanged."""
        return state if self.state_normaliser is None else self.state_normaliser(state)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [bs, T, n_agents, input] (build_inputs) -> V [bs, T, n_agents], from zero memory."""
        return self.network.forward_sequence(inputs, detach_every=self.detach_every)[..., 0]
