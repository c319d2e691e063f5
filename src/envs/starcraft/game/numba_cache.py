"""Numba as the package sets it up before anything compiles: its logger kept quiet, and its on-disk cache of
the simulator's compiled loops kept apart for each name the package is imported under.

As a guest in other code the package keeps Numba's logger at WARNING unless the user has set its level:
PyMARL2's and EPyMARL's main.py set the root logger to DEBUG, and Numba then logs every pass of the
simulator's first compile (about 75 MB of log).

The same files run as `envs.starcraft` (src/main.py) and as `marlkit.starcraft` (the installed package; with
`pip install -e .` from the very same folder). A compiled loop's cache entry refers to the loops it calls by
their module's name, so an entry written under one name fails to load under the other, while Numba keys its
in-tree cache (__pycache__ beside the source) by file and function only. This locator gives each name its own
sub-folder of __pycache__ (__pycache__/envs/, __pycache__/marlkit/). The game package's __init__ imports
this module before any module that compiles.
"""
import logging
import os

from numba.core import caching

if logging.getLogger("numba").level == logging.NOTSET:
    logging.getLogger("numba").setLevel(logging.WARNING)

# Numba's in-tree locator and the list of locators it tries (public names since 0.59, underscored before).
_IN_TREE = getattr(caching, "InTreeCacheLocator", None) or getattr(caching, "_InTreeCacheLocator")
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
PACKAGE = __name__.rpartition(".")[0]  # "envs.starcraft.game" here, "marlkit.starcraft.game" when installed


class PackageCacheLocator(_IN_TREE):
    """The in-tree cache of this package's functions, under __pycache__/<top-level package name>/."""

    def __init__(self, py_func, py_file: str):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(self._cache_path, PACKAGE.partition(".")[0])

    @classmethod
    def from_function(cls, py_func, py_file: str):
        """This locator for the functions of this package's modules (None for others': Numba's own locators)."""
        if not py_func.__module__.startswith(PACKAGE + "."):
            return None
        return super().from_function(py_func, py_file)


if PackageCacheLocator not in _CACHE_IMPL._locator_classes:
    _CACHE_IMPL._locator_classes.insert(0, PackageCacheLocator)
