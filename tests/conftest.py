"""Test set-up: PyMARL2-style imports (``from components.episode_buffer import ...``) need src/ on sys.path."""
import os
import sys

# Must precede any protobuf import (tensorboardX, pysc2); see requirements.txt.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
