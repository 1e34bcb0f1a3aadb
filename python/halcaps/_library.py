"""Finds and loads the compiled operators (torch.ops.halcaps.*)."""
import os
import pathlib

import torch

LIBRARY_NAME = "_halcaps_ops.so"


def library_path() -> pathlib.Path:
    """The extension to load: $HALCAPS_TORCH_LIBRARY if set, else the one
    installed beside this file, else the one in the source tree's build/."""
    explicit = os.environ.get("HALCAPS_TORCH_LIBRARY")
    if explicit:
        return pathlib.Path(explicit)
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / LIBRARY_NAME, here.parents[1] / "build" / "python" / "halcaps" / LIBRARY_NAME]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise ImportError(
        "halcaps: no compiled operators found (looked for " + ", ".join(map(str, candidates)) +
        "); install the package (pip install .) or set HALCAPS_TORCH_LIBRARY")


def load() -> pathlib.Path:
    path = library_path()
    torch.ops.load_library(str(path))
    return path
