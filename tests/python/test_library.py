"""The extension's symbols: the Halide runtime stays private (-Wl,--exclude-libs,ALL)
and nothing of Python's C API is needed (one build serves every Python version)."""
import shutil
import subprocess

import pytest

import halcaps


def dynamic_symbols(*flags):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm on this machine")
    listing = subprocess.run([nm, "-D", *flags, str(halcaps.LIBRARY_FILE)], check=True, capture_output=True,
                             text=True).stdout
    return [line.split()[-1] for line in listing.splitlines() if line.strip()]


def test_no_halide_symbol_is_exported():
    exported = dynamic_symbols("--defined-only")
    assert exported, "no exported symbols at all: wrong file?"
    assert not [s for s in exported if s.startswith("halide_")]


def test_no_python_api_is_used():
    undefined = dynamic_symbols("--undefined-only")
    assert not [s for s in undefined if s.startswith(("Py", "_Py"))]


def test_the_operators_are_registered():
    import torch
    for name in ["predict", "predict_backward", "squash", "route", "route_backward", "digitcaps", "digitcaps_with_s",
                 "digitcaps_backward", "digitcaps_backward_with_s", "capsconv", "capsconv_backward"]:
        assert hasattr(torch.ops.halcaps, name), name
