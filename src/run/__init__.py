from .run import run

REGISTRY = {
    "default": run,
    "dop_run": run,  # DOP: trains with run.LOOPS["dop_run"] (an off-policy buffer beside the on-policy one)
}
