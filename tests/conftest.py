"""Test set-up: PyMARL2-style imports (``from components.episode_buffer import ...``) need src/ on sys.path."""
import os
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

import pytest  # noqa: E402

FULL_TESTS = os.environ.get("MARLKIT_FULL_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """Long learning checks (marked ``slow``) run only with MARLKIT_FULL_TESTS=1; their short
    versions always run."""
    if FULL_TESTS:
        return
    skip = pytest.mark.skip(reason="slow learning check: set MARLKIT_FULL_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
