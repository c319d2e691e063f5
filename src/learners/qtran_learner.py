"""PyMARL2's QTRAN learner (``learner: qtran_learner``, with ``mixer: qtran_base``): QTRAN-base (Son et al.
2019), trained on one-step targets.

The joint networks (modules/mixers/qtran.py) give Q_jt(s, u) from the state and every agent's GRU
memory and action, and V_jt(s). With the agents' Q-values Q_i, their greedy actions u* (the online
networks', among the available actions) and m = the valid-step mask:

  td    = sum m (Q_jt(s_t, u_t) - y_t)^2 / sum m,  y_t = r_t + gamma (1 - d_t) Q'_jt(s_{t+1}, u*_{t+1})
          (Q'_jt: the target joint network on the target agents' memories; with double_q False u* is
          the target agents' greedy action)
  opt   = sum m (sum_i Q_i(u*_i) - Q_jt(s_t, u*_t) + V_jt(s_t))^2 / sum m
  nopt  = sum m min(0, sum_i Q_i(u_i) - Q_jt(s_t, u_t) + V_jt(s_t))^2 / sum m
  loss  = td + opt_loss * opt + nopt_min_loss * nopt        (no 0.5, as PyMARL2)

Q_jt is not trained by opt and nopt (detached there, as in the paper's authors' code): those losses
pull the agents' sum and V_jt to satisfy QTRAN's conditions, which make the agents' greedy joint action
Q_jt's greedy one. Logged as PyMARL2: loss, td_loss, opt_loss, nopt_loss, td_error_abs, td_targets (the
mean TD error), td_chosen_qs (mean Q_jt), v_mean (mean V_jt), agent_indiv_qs, grad_norm; the means are
over valid steps (PyMARL2 sums padded steps into td_chosen_qs and v_mean).

The joint network reads each agent's GRU memory after every step, which the fused unroll returns
(forward_sequence_pair with memories). PyMARL2 stacks the memories [bs, T, n_agents, hidden] and reads
them back with a reshape as if they were [bs, n_agents, T, hidden], so Q_jt sees memories of other
steps and agents; here each step sees its own agents' memories.
"""
import torch as th

from components.episode_buffer import EpisodeBatch
from utils.th_utils import one_hot

from .q_learner import UNAVAILABLE_Q, LossOutput, QLearner, Transitions, masked_squared_error


class QTranLearner(QLearner):
    MIXER_ALIASES = {}
    MIXERS = ("qtran_base",)

    def _loss(self, batch: EpisodeBatch, data: Transitions, per_weight: th.Tensor | None) -> LossOutput:
        mac_out, target_mac_out, memory, target_memory = self._unroll_with_memory(batch)
        # mac_out, target_mac_out [bs, T, n_agents, n_actions]; memory, target_memory [bs, T, n_agents, hidden]
        n_actions, states = self.args.n_actions, batch["state"]
        unavailable = batch["avail_actions"] == 0  # [bs, T, n_agents, n_actions]
        greedy_qvals, greedy_actions = mac_out.masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3, keepdim=True)
        # greedy_qvals (with gradients), greedy_actions [bs, T, n_agents, 1]
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=data.actions).squeeze(3)  # [bs, T-1, n_agents]
        joint_qs, vs = self._joint(self.mixer, states[:, :-1], memory[:, :-1], one_hot(data.actions, n_actions))
        # joint_qs, vs [bs, T-1, 1]
        with th.no_grad():
            next_actions = greedy_actions if getattr(self.args, "double_q", True) else \
                target_mac_out.masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3, keepdim=True)[1]
            target_joint_qs, _ = self._joint(self.target_mixer, states[:, 1:], target_memory[:, 1:],
                                             one_hot(next_actions[:, 1:], n_actions))  # [bs, T-1, 1]
            targets = data.rewards + self.args.gamma * (1 - data.terminated) * target_joint_qs  # [bs, T-1, 1]
        td_loss, masked_td_error, mask = masked_squared_error(joint_qs, targets, data.mask, per_weight, half=False)
        max_joint_qs, _ = self._joint(self.mixer, states[:, :-1], memory[:, :-1], one_hot(greedy_actions[:, :-1], n_actions))
        opt_error = greedy_qvals[:, :-1].squeeze(3).sum(dim=2, keepdim=True) - max_joint_qs.detach() + vs  # [bs, T-1, 1]
        nopt_error = (chosen_action_qvals.sum(dim=2, keepdim=True) - joint_qs.detach() + vs).clamp(max=0)  # [bs, T-1, 1]
        zeros = th.zeros_like(opt_error)
        opt_loss = masked_squared_error(opt_error, zeros, mask, per_weight, half=False)[0]
        nopt_loss = masked_squared_error(nopt_error, zeros, mask, per_weight, half=False)[0]
        loss = td_loss + self.args.opt_loss * opt_loss + self.args.nopt_min_loss * nopt_loss

        def stats() -> dict:
            valid = mask.sum().item()
            return {"loss": loss.item(), "td_loss": td_loss.item(), "opt_loss": opt_loss.item(),
                    "nopt_loss": nopt_loss.item(), "td_error_abs": masked_td_error.abs().sum().item() / valid,
                    "td_targets": masked_td_error.sum().item() / valid,
                    "td_chosen_qs": (joint_qs * mask).sum().item() / valid, "v_mean": (vs * mask).sum().item() / valid,
                    "agent_indiv_qs": (chosen_action_qvals * mask).sum().item() / (valid * self.args.n_agents)}

        return LossOutput(loss, stats, masked_td_error, mask, mac_out)

    def _unroll_with_memory(self, batch: EpisodeBatch) -> tuple:
        """As _unroll, with the GRU memories after each step [bs, T, n_agents, hidden] of both controllers."""
        if self.unroll == "stepwise":
            return self._unroll_stepwise_with_memory(batch)
        with self._autocast(batch):
            outputs = self.mac.forward_sequence_pair(self.target_mac, batch, with_memory=True)
        return tuple(output.float() for output in outputs)

    def _unroll_stepwise_with_memory(self, batch: EpisodeBatch) -> tuple:
        outputs = []
        for mac in (self.mac, self.target_mac):
            with th.set_grad_enabled(mac is self.mac and th.is_grad_enabled()), self._autocast(batch):
                mac.init_hidden(batch.batch_size)
                steps = [(mac.forward(batch, t=t), mac.hidden_states) for t in range(batch.max_seq_length)]
            outputs.append([th.stack(values, dim=1).float() for values in zip(*steps)])  # [bs, T, n_agents, ...]
        (mac_out, memory), (target_mac_out, target_memory) = outputs
        return mac_out, target_mac_out, memory, target_memory

    def _joint(self, mixer, states: th.Tensor, memory: th.Tensor, actions_onehot: th.Tensor) -> tuple:
        with self._autocast(states):
            joint_qs, vs = mixer(states, memory, actions_onehot)
        return joint_qs.float(), vs.float()

    def _joint_value(self):
        return None  # Q_jt needs the agents' memories, which the matrix game's table does not carry
