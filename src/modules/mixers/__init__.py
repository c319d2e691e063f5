"""Mixing networks that combine per-agent Q-values into Q_tot: REGISTRY[name](args)."""
from .qmix import QMixer
from .qmix_original import OriginalQMixer
from .vdn import VDNMixer

REGISTRY = {
    "qmix": QMixer,  # PyMARL2's nmix (nq_learner)
    "qmix_original": OriginalQMixer,  # PyMARL's QMixer (q_learner's "qmix")
    "vdn": VDNMixer,
}
