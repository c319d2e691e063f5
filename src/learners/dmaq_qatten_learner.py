"""PyMARL2's DMAQ_qattenLearner (``learner: dmaq_qatten_learner``): QPLEX, trained on TD(lambda) targets.

QPLEX's mixer (modules/mixers/dmaq.py) writes Q_tot = V_tot + A_tot with advantages A_i <= 0 of each
agent's transformed Q-value against its greedy one, weighted by positive importance weights of the
joint action. So the learner gives the mixer, beside the agents' Q-values of the actions taken, the
agents' greedy Q-values and the one-hot joint action:

  online:  Q_tot(s_t, u_t)  = V(Q_i(u_t)) + A(Q_i(u_t), max_a Q_i, u_t)       t < T-1
  target:  Q'_tot(s_t, u*_t) = V(Q'_i(u*)) + A(Q'_i(u*), max_a Q'_i, u*)      u* = the online
           networks' greedy joint action (double Q, which PyMARL2 requires)
  targets: TD(lambda) returns on Q'_tot; loss = 0.5 * masked mean squared error

As PyMARL2 it logs "loss" (not loss_td) and "hit_prob", the fraction of agent-steps whose action
taken is the online networks' greedy one. PyMARL2 trains it with Adam (qplex.yaml says so here with
``optimizer: adam``) and builds the one-hot greedy actions on the GPU only (``.cuda()``), so it fails
on a CPU; here they follow the batch's device.
"""
import torch as th

from components.episode_buffer import EpisodeBatch
from utils.th_utils import one_hot

from .nq_learner import NQLearner
from .q_learner import UNAVAILABLE_Q, LossOutput, Transitions, masked_squared_error, td_stats


class DMAQLearner(NQLearner):
    MIXERS = ("dmaq",)

    def _make_mixer(self, args):
        if not getattr(args, "double_q", True):
            raise ValueError("dmaq_qatten_learner needs double_q: True (PyMARL2's QPLEX has no other target)")
        return super()._make_mixer(args)

    def _loss(self, batch: EpisodeBatch, data: Transitions, per_weight: th.Tensor | None) -> LossOutput:
        mac_out, target_mac_out = self._unroll(batch)  # [bs, T, n_agents, n_actions] each
        unavailable = batch["avail_actions"] == 0  # [bs, T, n_agents, n_actions]
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=data.actions).squeeze(3)  # [bs, T-1, n_agents]
        greedy_qvals, greedy_actions = mac_out.detach().masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3, keepdim=True)
        # greedy_qvals, greedy_actions [bs, T, n_agents, 1]: the online networks' best available action
        states = batch["state"]
        q_tot = self._dueling(self.mixer, chosen_action_qvals, states[:, :-1], one_hot(data.actions, self.args.n_actions),
                              greedy_qvals[:, :-1].squeeze(3))  # [bs, T-1, 1]
        with th.no_grad():
            target_chosen = th.gather(target_mac_out, 3, greedy_actions).squeeze(3)  # [bs, T, n_agents]
            target_max = target_mac_out.masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3)[0]  # [bs, T, n_agents]
            target_q_tot = self._dueling(self.target_mixer, target_chosen, states,
                                         one_hot(greedy_actions, self.args.n_actions), target_max)  # [bs, T, 1]
            targets = self._lambda_returns(batch, target_mac_out, target_q_tot, data)  # [bs, T-1, 1]
        loss, masked_td_error, mask = masked_squared_error(q_tot, targets, data.mask, per_weight)

        def stats() -> dict:
            is_greedy = (greedy_actions[:, :-1] == data.actions).float().mean(dim=2)  # [bs, T-1, 1]
            hit_prob = (is_greedy * mask).sum().item() / mask.sum().item()
            return {**td_stats(loss, masked_td_error, q_tot, targets, mask, self.args.n_agents, "loss"),
                    "hit_prob": hit_prob}

        return LossOutput(loss, stats, masked_td_error, mask, mac_out)

    def _joint_value(self):
        def value(agent_qs: th.Tensor, states: th.Tensor, actions: th.Tensor) -> th.Tensor:
            # Every joint action is listed, so an agent's greedy Q is its largest Q over them.
            max_qs = agent_qs.max(dim=1, keepdim=True)[0].expand_as(agent_qs)  # [b, t, n_agents]
            return self._dueling(self.mixer, agent_qs, states, one_hot(actions, self.args.n_actions), max_qs)
        return value

    def _dueling(self, mixer, agent_qs: th.Tensor, states: th.Tensor, actions_onehot: th.Tensor,
                 max_qs: th.Tensor) -> th.Tensor:
        """QPLEX's Q_tot = V_tot + A_tot of agent_qs and max_qs [b, t, n_agents] for the one-hot joint
        actions [b, t, n_agents, n_actions]: [b, t, 1]."""
        with self._autocast(states):
            value = mixer(agent_qs, states, is_v=True)
            advantage = mixer(agent_qs, states, actions=actions_onehot, max_q_i=max_qs, is_v=False)
        return value + advantage
