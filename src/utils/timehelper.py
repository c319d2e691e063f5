"""Wall-clock helpers for the progress lines printed during training."""
import time

# Estimates beyond this are noise (e.g. right after the first step); cap them.
_MAX_ESTIMATE_S = 100 * 24 * 60 * 60


def time_left(start_time: float, t_start: int, t_current: int, t_max: int) -> str:
    """Estimated wall time until t_max, extrapolating the speed seen since (start_time, t_start)."""
    if t_current >= t_max:
        return "-"
    elapsed = time.time() - start_time
    steps_done = max(1, t_current - t_start)
    estimate = min(elapsed * (t_max - t_current) / steps_done, _MAX_ESTIMATE_S)
    return time_str(estimate)


def time_str(seconds: float) -> str:
    """Format a duration as e.g. '1 days, 2 hours, 3 minutes, 4 seconds' (zero leading units omitted)."""
    days, rest = divmod(seconds, 24 * 60 * 60)
    hours, rest = divmod(rest, 60 * 60)
    minutes, secs = divmod(rest, 60)
    parts = [f"{int(value):d} {unit}, " for value, unit in ((days, "days"), (hours, "hours"), (minutes, "minutes"))
             if value > 0]
    return "".join(parts) + f"{int(secs):d} seconds"
