"""Stopping a run on SIGINT or SIGTERM without losing it.

While training (and while it saves its final checkpoint) the first SIGINT or SIGTERM only asks the
run to stop: the training loop finishes its iteration (or drops an unfinished episode batch), saves
a final checkpoint and exits. A second signal interrupts at once (KeyboardInterrupt); a checkpoint
being written then is rolled back. Code that may wait long (the parallel runner waiting on an env
worker) polls `stop_requested()` so that a hung worker does not hold the stop up.
"""
import signal
import threading
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_request = {"name": None, "at": None}  # the first stop signal's name and time.monotonic(), while armed


def stop_requested() -> tuple[str, float] | None:
    """(signal name, time.monotonic() it arrived) of a stop signal received inside StopSignals, else None."""
    return None if _request["name"] is None else (_request["name"], _request["at"])


class StopSignals:
    """Context in which the first SIGINT/SIGTERM is recorded (`received`) instead of raising, and a
    second one raises KeyboardInterrupt; the previous handlers come back on exit.

    Only the main thread can set signal handlers. Entered on another thread (a lane of a seed batch,
    run/seed_batch.py, whose main thread holds the handlers), `received` is the stop signal the
    process received."""

    def __init__(self):
        self._received = None  # name of the first signal
        self._previous = {}
        self._installed = False

    @property
    def received(self) -> str | None:
        return self._received if self._installed else _request["name"]

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # only there can handlers be set
            self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
            self._installed = True
        return self

    def __exit__(self, *_exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self._installed:
            _request.update(name=None, at=None)

    def _handle(self, signum: int, _frame) -> None:
        if self._received is not None:
            raise KeyboardInterrupt
        self._received = signal.Signals(signum).name
        _request.update(name=self._received, at=time.monotonic())


class StoppedWaiting(Exception):
    """Raised by code that gave up waiting (e.g. on a hung env worker) because a stop was requested."""
