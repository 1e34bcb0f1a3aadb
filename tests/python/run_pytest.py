"""Runs pytest for ctest: `run_pytest.py [--require-cuda] PYTEST_ARGS...`.
With --require-cuda, exits 77 (ctest's "skipped") when torch sees no CUDA device."""
import sys

import pytest

args = sys.argv[1:]
if args[:1] == ["--require-cuda"]:
    args = args[1:]
    import torch
    if not torch.cuda.is_available():
        print("no CUDA device: the CUDA tests are skipped")
        sys.exit(77)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs", "-rx"] + args))
