"""Data-parallel training: 2 CPU processes (gloo on loopback) under torchrun
take the same steps as one process on the combined batch."""
import os
import pathlib
import socket
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import capsnet_digits  # noqa: E402

STEPS, BATCH = 4, 32


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_match_one_process(tmp_path):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
               HL_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={free_port()}", str(ROOT / "examples" / "capsnet_digits.py"), "--device=cpu",
               "--threads=1", f"--steps={STEPS}", f"--batch-size={BATCH}", "--epochs=1",
               f"--save-params={tmp_path / 'params'}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [torch.load(tmp_path / f"params.rank{r}") for r in range(2)]
    for name in ranks[0]:
        assert torch.equal(ranks[0][name], ranks[1][name]), f"{name} differs between the ranks"

    torch.set_num_threads(2)
    single = capsnet_digits.train("halcaps", epochs=1, batch_size=BATCH, steps=STEPS, log=lambda *a: None,
                                  evaluate=False)
    assert single["steps"] == STEPS
    initial = capsnet_digits.build("halcaps", 0).state_dict()
    for name, expected in single["model"].state_dict().items():
        got = ranks[0][name]
        assert not torch.equal(expected, initial[name]) or name.endswith("logits"), f"{name} did not train"
        torch.testing.assert_close(got, expected.detach(), rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
