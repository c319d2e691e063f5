"""Mixing networks that combine per-agent Q-values into Q_tot: REGISTRY[name](args)."""
from .qmix import QMixer
from .vdn import VDNMixer

REGISTRY = {
    "qmix": QMixer,
    "vdn": VDNMixer,
}
