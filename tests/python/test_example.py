"""The CapsNet example, shortly: it learns, and its halcaps and pure-PyTorch
models take the same first steps (same seed, same math)."""
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import capsnet_digits  # noqa: E402


def test_short_training_learns_and_backends_agree():
    torch.set_num_threads(2)
    steps = 42  # 2 epochs of the 1347 training digits at batch 64
    halcaps_run = capsnet_digits.train("halcaps", epochs=2, steps=steps, log=lambda *a: None)
    torch_run = capsnet_digits.train("torch", epochs=1, steps=5, log=lambda *a: None, evaluate=False)
    # far above chance (10%)
    assert halcaps_run["test_accuracy"][-1] >= 0.8, halcaps_run["test_accuracy"]
    first = torch.tensor(halcaps_run["losses"][:5], dtype=torch.float64)
    reference = torch.tensor(torch_run["losses"][:5], dtype=torch.float64)
    assert torch.allclose(first, reference, rtol=1e-4, atol=1e-6), (first, reference)
    # and the loss went down
    assert sum(halcaps_run["losses"][-5:]) < 0.5 * sum(halcaps_run["losses"][:5])


def test_same_initial_weights():
    a, b = capsnet_digits.build("halcaps", 7), capsnet_digits.build("torch", 7)
    for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(p, q), name
