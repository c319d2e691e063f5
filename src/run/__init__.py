from .run import run

REGISTRY = {
    "default": run,
}
