"""Replay rendering for the built-in SMAC simulator: record battles, write them as animated GIFs.

`ReplayRecorder` keeps the frames of the last `max_episodes` episodes: call `begin_episode()`
on every reset and `add_frame(units, radius, attacks)` after the reset and after every env
step; `save(path)` (or `save_replay(replay_dir, prefix)`) writes them as one GIF. Frames are
small numpy tables drawn only when saving, so recording costs a few array copies per step.
`RecordingEngine` wraps any engine of the engine contract and does this bookkeeping, adding
the contract's `save_replay(replay_dir, prefix) -> path`; it passes reset's arguments on (SMACv2's
reset(team) creates new armies every episode).

The command line that writes a scripted battle's replay is envs/starcraft/render.py.
"""
import datetime
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..game.units import get_unit_stats

# Columns of a recorded frame table, one row per unit: [n_units, len(_COLUMNS)].
_COLUMNS = ("x", "y", "radius", "health", "shield", "alive")
_X, _Y, _RADIUS, _HEALTH, _SHIELD, _ALIVE = range(len(_COLUMNS))
_NO_SHIELD = -1.0  # shield fraction of units without shields

HEADER_PX = 20
_N_SHADES = 8  # grey levels for the terrain height

# Palette (the GIF is drawn directly in "P" mode so colours are identical in every frame).
_SHADES_PATHABLE = 1
_SHADES_BLOCKED = _SHADES_PATHABLE + _N_SHADES
_NAMED_COLOURS = {
    "background": (0, 0, 0),
    "ally": (60, 140, 255),
    "enemy": (230, 70, 60),
    "ally_shot": (170, 215, 255),
    "enemy_shot": (255, 190, 110),
    "health": (60, 220, 60),
    "health_lost": (110, 25, 25),
    "shield": (90, 225, 245),
    "dead": (25, 25, 25),
    "text": (255, 255, 255),
}
_FIRST_NAMED = _SHADES_BLOCKED + _N_SHADES
_INDEX = {name: _FIRST_NAMED + k for k, name in enumerate(_NAMED_COLOURS)}


def _palette() -> list[int]:
    """Flat RGB palette: index 0 unused, pathable greys, blocked dark blues, named colours."""
    rgb = [(0, 0, 0)]
    rgb += [(70 + 16 * k, 70 + 16 * k, 70 + 16 * k) for k in range(_N_SHADES)]
    rgb += [(12 + 5 * k, 14 + 5 * k, 28 + 6 * k) for k in range(_N_SHADES)]
    rgb += list(_NAMED_COLOURS.values())
    return [channel for colour in rgb for channel in colour]


@dataclass
class _Episode:
    """The frames of one episode (rows < n_allies are allies, the rest enemies)."""

    n_allies: int = 0
    tables: list[np.ndarray] = field(default_factory=list)   # each float32 [n_units, 6]
    attacks: list[np.ndarray] = field(default_factory=list)  # each int32 [n_attacks, 2]


class ReplayRecorder:
    """Keeps the frames of the last `max_episodes` episodes and writes them as one GIF.

    map_name is printed on every frame; pathing_grid (bool) and terrain_height (float in
    [0, 1]) are [map_x, map_y] arrays indexed [x][y], as the engine holds them.
    """

    def __init__(self, map_name: str, pathing_grid: np.ndarray, terrain_height: np.ndarray,
                 max_episodes: int = 5, cell_px: int = 16, frame_ms: int = 120):
        if not isinstance(max_episodes, int) or max_episodes < 1:
            raise ValueError(f"max_episodes must be a positive int, got {max_episodes!r}")
        pathing = np.asarray(pathing_grid, dtype=bool)
        height = np.asarray(terrain_height, dtype=np.float64)
        if pathing.ndim != 2 or pathing.shape != height.shape:
            raise ValueError(f"pathing_grid and terrain_height must be 2-D arrays of one shape "
                             f"[map_x, map_y], got {pathing.shape} and {height.shape}")
        self.map_name = map_name
        self.map_x, self.map_y = pathing.shape
        self.cell_px = cell_px
        self.frame_ms = frame_ms
        self._episodes: deque[_Episode] = deque(maxlen=max_episodes)
        self._episodes_begun = 0
        self._background = self._draw_terrain(pathing, height)
        self._font = ImageFont.load_default()

    @property
    def n_frames(self) -> int:
        """Frames currently kept (over all kept episodes)."""
        return sum(len(episode.tables) for episode in self._episodes)

    @property
    def n_episodes(self) -> int:
        return len(self._episodes)

    def begin_episode(self) -> None:
        """Start a new episode; the oldest one is dropped when more than max_episodes are kept."""
        self._episodes.append(_Episode())
        self._episodes_begun += 1

    def add_frame(self, units: Any, radius: np.ndarray,
                  attacks: Sequence[tuple[int, int]] = ()) -> None:
        """Record the battle as it is now.

        units: the engine's `Units` (n_allies, x, y, health, health_max, shield, shield_max,
        alive; allies first); radius: float [n_units], the drawn size (it also tells the unit
        types apart); attacks: (attacker, target) unit indices that hit during the last step
        (engine.last_attacks), drawn as lines.
        """
        if not self._episodes:
            self.begin_episode()
        episode = self._episodes[-1]
        episode.n_allies = int(units.n_allies)
        health = np.divide(units.health, units.health_max,
                           out=np.zeros(len(units.x)), where=units.health_max > 0)
        shield = np.divide(units.shield, units.shield_max,
                           out=np.full(len(units.x), _NO_SHIELD), where=units.shield_max > 0)
        # [n_units, 6] in _COLUMNS order
        table = np.column_stack((units.x, units.y, radius, health, shield, units.alive))
        episode.tables.append(table.astype(np.float32))
        episode.attacks.append(np.array(attacks, dtype=np.int32).reshape(-1, 2))

    def save(self, path: str) -> int:
        """Write all kept frames as an animated GIF at `path`; returns the number of frames."""
        images, durations = [], []
        first_episode = self._episodes_begun - len(self._episodes) + 1
        for number, episode in enumerate(self._episodes, start=first_episode):
            for step, (table, attacks) in enumerate(zip(episode.tables, episode.attacks)):
                images.append(self._draw_frame(episode, table, attacks, number, step))
                durations.append(self.frame_ms)
            if episode.tables:
                durations[-1] = 4 * self.frame_ms  # linger on each episode's outcome
        if not images:
            raise ValueError("no frames recorded; call add_frame() after reset and every step "
                             "before save()")
        images[0].save(path, save_all=True, append_images=images[1:], duration=durations,
                       loop=0, optimize=False)
        return len(images)

    def save_replay(self, replay_dir: str, prefix: str) -> str:
        """Save as <replay_dir>/<prefix>_<UTC time>_<pid>.gif (directory created); returns the path.

        The process id keeps the parallel runner's workers, which save at the same moment, apart.
        """
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
        path = os.path.join(replay_dir, f"{prefix}_{stamp}_{os.getpid()}.gif")
        os.makedirs(replay_dir or ".", exist_ok=True)
        self.save(path)
        return path

    # -- drawing -----------------------------------------------------------------------------

    def _to_pixels(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World coordinates -> image coordinates (y grows downwards in the image)."""
        return x * self.cell_px, (self.map_y - y) * self.cell_px + HEADER_PX

    def _draw_terrain(self, pathing: np.ndarray, height: np.ndarray) -> Image.Image:
        shade = np.clip((height * _N_SHADES).astype(np.int64), 0, _N_SHADES - 1)
        cells = np.where(pathing, _SHADES_PATHABLE + shade, _SHADES_BLOCKED + shade)
        # [map_x, map_y] indexed [x][y] -> image rows top = north: [map_y, map_x]
        rows = np.flipud(cells.T).astype(np.uint8)
        # [map_y * cell_px, map_x * cell_px] palette indices, under a header strip
        terrain = np.kron(rows, np.ones((self.cell_px, self.cell_px), dtype=np.uint8))
        header = np.full((HEADER_PX, terrain.shape[1]), _INDEX["background"], dtype=np.uint8)
        pixels = np.ascontiguousarray(np.vstack((header, terrain)))
        image = Image.frombytes("P", (pixels.shape[1], pixels.shape[0]), pixels.tobytes())
        image.putpalette(_palette())
        return image

    def _draw_frame(self, episode: _Episode, table: np.ndarray, attacks: np.ndarray,
                    number: int, step: int) -> Image.Image:
        image = self._background.copy()
        draw = ImageDraw.Draw(image)
        px, py = self._to_pixels(table[:, _X], table[:, _Y])
        alive = table[:, _ALIVE] > 0
        is_ally = np.arange(len(table)) < episode.n_allies
        for i in np.flatnonzero(~alive):
            self._draw_cross(draw, px[i], py[i])
        for attacker, target in attacks:  # under the units, so the lines join their edges
            colour = "ally_shot" if is_ally[attacker] else "enemy_shot"
            draw.line([(px[attacker], py[attacker]), (px[target], py[target])],
                      fill=_INDEX[colour], width=1)
        for i in np.flatnonzero(alive):
            self._draw_unit(draw, px[i], py[i], table[i], "ally" if is_ally[i] else "enemy")
        n_allies = episode.n_allies
        caption = (f"{self.map_name}  episode {number}  step {step}  "
                   f"allies {int(alive[:n_allies].sum())}/{n_allies}  "
                   f"enemies {int(alive[n_allies:].sum())}/{len(table) - n_allies}")
        draw.text((4, 4), caption, fill=_INDEX["text"], font=self._font)
        return image

    def _draw_unit(self, draw: ImageDraw.ImageDraw, px: float, py: float, row: np.ndarray,
                   side: str) -> None:
        """A disc of the unit's radius, a health bar above it and a shield bar above that."""
        r = max(row[_RADIUS] * self.cell_px, 2.0)
        draw.ellipse([px - r, py - r, px + r, py + r], fill=_INDEX[side], outline=_INDEX["text"])
        half_width = max(r, 5.0)
        top = py - r - 4
        self._draw_bar(draw, px - half_width, top, 2 * half_width, row[_HEALTH], "health")
        if row[_SHIELD] != _NO_SHIELD:
            self._draw_bar(draw, px - half_width, top - 3, 2 * half_width, row[_SHIELD], "shield")

    @staticmethod
    def _draw_bar(draw: ImageDraw.ImageDraw, left: float, top: float, width: float,
                  fraction: float, colour: str) -> None:
        draw.rectangle([left, top, left + width, top + 2], fill=_INDEX["health_lost"])
        if fraction > 0:
            draw.rectangle([left, top, left + width * min(fraction, 1.0), top + 2],
                           fill=_INDEX[colour])

    @staticmethod
    def _draw_cross(draw: ImageDraw.ImageDraw, px: float, py: float, size: float = 4.0) -> None:
        colour = _INDEX["dead"]
        draw.line([(px - size, py - size), (px + size, py + size)], fill=colour)
        draw.line([(px - size, py + size), (px + size, py - size)], fill=colour)


class RecordingEngine:
    """An engine of the engine contract whose every reset and step is recorded for replays.

    Unit sizes come from envs.starcraft.game.units, so the engine must use the type ids of
    envs.starcraft.game.unit_ids (the built-in engine does); they are read at every reset, since a
    SMACv2 map's armies change from episode to episode. Everything else (map_x, pathing_grid,
    last_attacks, ally_unit_ids, close, ...) is the wrapped engine's.
    """

    def __init__(self, engine: Any, map_name: str, max_episodes: int = 5):
        self.engine = engine
        self.recorder = ReplayRecorder(map_name, engine.pathing_grid, engine.terrain_height,
                                       max_episodes=max_episodes)
        self._radius: np.ndarray | None = None  # float [n_units], of the current episode's units

    def __getattr__(self, name: str) -> Any:
        engine = self.__dict__.get("engine")  # absent while copy/pickle rebuild the wrapper
        if engine is None:
            raise AttributeError(name)
        return getattr(engine, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped engine's reset (SMAC's reset(), SMACv2's reset(team)), recorded."""
        units = self.engine.reset(*args, **kwargs)
        self._radius = np.array([get_unit_stats(t).radius for t in units.unit_type])
        self.recorder.begin_episode()
        self.recorder.add_frame(units, self._radius)
        return units

    def step(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> Any:
        units = self.engine.step(kind, tx, ty, target)
        self.recorder.add_frame(units, self._radius, self.engine.last_attacks)
        return units

    def save_replay(self, replay_dir: str, prefix: str) -> str:
        return self.recorder.save_replay(replay_dir, prefix)
