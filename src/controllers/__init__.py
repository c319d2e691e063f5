"""Multi-agent controllers (MACs): build agent inputs from a batch, run the shared agent network,
and pick actions."""
from .basic_controller import BasicMAC
from .n_controller import NMAC

REGISTRY = {
    "basic_mac": BasicMAC,
    "n_mac": NMAC,
}
