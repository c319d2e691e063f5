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
    second one raises KeyboardInterrupt; the previous handlers come back on exit."""

    def __init__(self):
        self.received = None  # name of the first signal
        self._previous = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # only there can handlers be set
            self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, *_exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        _request.update(name=None, at=None)

    def _handle(self, signum: int, _frame) -> None:
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        _request.update(name=self.received, at=time.monotonic())


class StoppedWaiting(Exception):
    """Raised by code that gave up waiting (e.g. on a hung env worker) because a stop was requested."""
