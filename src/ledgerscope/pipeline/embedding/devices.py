"""Where the embedding model runs: ``[embedding] device`` (``cpu`` by default, the reference).

``auto`` picks CUDA, then MPS, then CPU. Vectors computed on a GPU differ from the CPU's in the last
bits, so the device is part of the embedding cache's model identity and recorded in the manifest;
``rerun`` on another device labels its differences as device differences.
"""

from __future__ import annotations

from ledgerscope.common.errors import InputError, Problem

DEVICES = ("cpu", "auto", "cuda", "mps")
#: batch sizes when the arm leaves ``batch_size`` at its default: a GPU wants far larger batches
DEVICE_BATCH = {"cpu": 64, "cuda": 256, "mps": 128}


def resolve_device(setting: str | None) -> str:
    """``auto`` -> the best device present; ``cuda``/``mps`` must be present."""
    import torch

    name = (setting or "cpu").lower()
    if name not in DEVICES:
        raise InputError(
            Problem("<config>", None, "embedding.device", f"must be one of {', '.join(DEVICES)}")
        )
    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if name == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        raise InputError(Problem("<config>", None, "embedding.device", f"{name!r} is not available here"))
    return name


def batch_size_for(device: str, configured: int, default: int = 64) -> int:
    """The configured batch size, or (left at the default) the device's."""
    return DEVICE_BATCH.get(device.split(":")[0], default) if configured == default else configured


def describe_device(device: str) -> dict:
    """What the manifest records: the device type, its name, torch's version."""
    import torch

    out = {"type": device.split(":")[0], "torch": torch.__version__}
    if out["type"] == "cuda":
        out["name"] = torch.cuda.get_device_name(0)
    else:
        import platform

        out["name"] = platform.processor() or platform.machine()
    return out
