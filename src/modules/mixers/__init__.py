"""Mixing networks that combine per-agent Q-values into a joint value: REGISTRY[name](args).

Each learner says which of them it trains (its MIXERS): qmix, qmix_original, vdn and qatten mix
[b, t, n_agents] Q-values with the state; dmaq (QPLEX) also needs the joint action and the agents'
greedy values; qtran_base learns a joint Q beside the agents'. CENTRAL_REGISTRY holds weighted
QMIX's unrestricted central mixers (``central_mixer``).
"""
from .dmaq import DMAQMixer
from .qatten import QattenMixer
from .qmix import QMixer
from .qmix_central import QMixerCentralFF
from .qmix_original import OriginalQMixer
from .qtran import QTranBase
from .vdn import VDNMixer

REGISTRY = {
    "qmix": QMixer,  # PyMARL2's nmix (nq_learner)
    "qmix_original": OriginalQMixer,  # PyMARL's QMixer (q_learner's and max_q_learner's "qmix")
    "vdn": VDNMixer,
    "qatten": QattenMixer,
    "dmaq": DMAQMixer,  # QPLEX (dmaq_qatten_learner)
    "qtran_base": QTranBase,  # QTRAN (qtran_learner)
}

CENTRAL_REGISTRY = {
    "ff": QMixerCentralFF,  # weighted QMIX's central mixer (max_q_learner)
}
