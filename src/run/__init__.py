from .run import run

REGISTRY = {
    "default": run,
    "dop_run": run,  # DOP: trains with run.LOOPS["dop_run"] (an off-policy buffer beside the on-policy one)
    "on_off": run,  # RIIT: trains with run.LOOPS["on_off"] (an off-policy buffer beside the on-policy one)
}
