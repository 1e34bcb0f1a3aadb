#!/usr/bin/env python3
"""The seed blog's CapsNet (a convolution, primary capsules, DigitCaps with
dynamic routing, margin loss) trained on scikit-learn's handwritten digits
(8x8 images, bundled with scikit-learn: no download).

    python examples/capsnet_digits.py                      # halcaps' DigitCaps
    python examples/capsnet_digits.py --backend torch      # the same model in plain PyTorch
    python examples/capsnet_digits.py --backend both --plot curves.png --time-steps 20
    torchrun --nproc_per_node=2 examples/capsnet_digits.py # data-parallel (gloo on CPU, NCCL on GPU)

Both backends start from the same weights (same seed, same parameter
shapes and initialisation) and see the same batches; only the DigitCaps layer
differs: halcaps.nn.DigitCaps (torch.ops.halcaps) or TorchDigitCaps below,
the blog's "reshape and transpose" path.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
from torch import nn

import halcaps
import halcaps.nn


class TorchDigitCaps(nn.Module):
    """DigitCaps in plain PyTorch: the prediction as one batched matmul after
    reshapes and transposes, then dynamic routing. Same parameters and
    initialisation as halcaps.nn.DigitCaps."""

    def __init__(self, in_caps, in_dim, out_caps, out_dim, iterations=3, learn_logits=False):
        super().__init__()
        self.iterations = iterations
        self.weight = nn.Parameter(torch.empty(in_caps, out_caps, out_dim, in_dim))
        halcaps.nn.glorot_uniform_(self.weight, in_dim, out_dim)
        self.logits = nn.Parameter(torch.zeros(in_caps, out_caps)) if learn_logits else None

    def forward(self, u):
        I, J, E, K = self.weight.shape
        B = u.shape[0]
        # [I, J*E, K] @ [I, K, B] -> [I, J*E, B] -> [B, I, J, E]
        u_hat = torch.matmul(self.weight.reshape(I, J * E, K), u.permute(1, 2, 0))
        u_hat = u_hat.reshape(I, J, E, B).permute(3, 0, 1, 2)
        b = u.new_zeros(B, I, J) if self.logits is None else self.logits.expand(B, I, J)
        for t in range(self.iterations):
            c = torch.softmax(b, dim=2)
            s = (c.unsqueeze(-1) * u_hat).sum(dim=1)  # [B, J, E]
            v = squash(s)
            if t + 1 < self.iterations:
                b = b + (u_hat * v.unsqueeze(1)).sum(dim=-1)
        return v


def squash(s, eps=1e-9):
    n2 = (s * s).sum(-1, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + eps)


class CapsNet(nn.Module):
    """8x8 image -> conv 3x3 (64, ReLU) -> primary capsules (conv 3x3, 16 types of 8 dims: 4x4x16 = 256
    capsules) -> DigitCaps (10 capsules of 16, routing) -> their lengths are the class scores."""

    def __init__(self, backend="halcaps", iterations=3, channels=64, types=16):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, 3)
        self.primary = nn.Conv2d(channels, types * 8, 3)
        in_caps = types * 4 * 4
        if backend == "halcaps":
            self.digits = halcaps.nn.DigitCaps(in_caps, 8, 10, 16, iterations=iterations, learn_logits=True)
        else:
            self.digits = TorchDigitCaps(in_caps, 8, 10, 16, iterations=iterations, learn_logits=True)
        self.types = types

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = self.primary(y)  # [B, types*8, 4, 4]
        B = y.shape[0]
        u = y.reshape(B, self.types, 8, 4, 4).permute(0, 1, 3, 4, 2).reshape(B, -1, 8)
        v = self.digits(squash(u))
        return v.norm(dim=-1)  # [B, 10]


def load_digits_split(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target, dtype=torch.int64)
    train_idx, test_idx = train_test_split(range(len(y)), test_size=0.25, random_state=seed, stratify=data.target)
    return x[train_idx], y[train_idx], x[test_idx], y[test_idx]


def accuracy(model, x, y, batch=256):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(y), batch):
            correct += (model(x[start:start + batch]).argmax(1) == y[start:start + batch]).sum().item()
    model.train()
    return correct / len(y)


def build(backend, seed, iterations=3, device="cpu"):
    torch.manual_seed(seed)
    return CapsNet(backend, iterations).to(device)


def train(backend="halcaps", epochs=10, batch_size=64, lr=3e-3, seed=0, steps=None, device="cpu", log=print,
          evaluate=True):
    """Trains from `seed`; returns a dict of the run (losses per step, accuracy per epoch, ...).

    Under torch.distributed (initialised by the caller) each rank takes its
    contiguous share of every global batch of `batch_size`; DDP averages the
    gradients, so the steps are those of one process on the whole batch."""
    distributed = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    if batch_size % world:
        raise ValueError(f"batch size {batch_size} is not a multiple of the {world} processes")
    x_train, y_train, x_test, y_test = load_digits_split()
    x_train, y_train, x_test, y_test = (t.to(device) for t in (x_train, y_train, x_test, y_test))
    model = build(backend, seed, device=device)
    trained = nn.parallel.DistributedDataParallel(model) if distributed else model
    optimiser = torch.optim.Adam(trained.parameters(), lr=lr)
    order = torch.Generator().manual_seed(seed + 1)
    share = batch_size // world
    run = dict(backend=backend, losses=[], test_accuracy=[], epoch_seconds=[], steps=0)
    start = time.perf_counter()
    for epoch in range(epochs):
        epoch_start = time.perf_counter()
        permutation = torch.randperm(len(y_train), generator=order)
        for first in range(0, len(y_train) - batch_size + 1, batch_size):
            batch = permutation[first:first + batch_size][rank * share:(rank + 1) * share].to(device)
            loss = halcaps.nn.margin_loss(trained(x_train[batch]), y_train[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if distributed:  # the global batch's mean loss, for the log
                loss = loss.detach().clone()
                dist.all_reduce(loss)
                loss /= world
            run["losses"].append(loss.item())
            run["steps"] += 1
            if steps is not None and run["steps"] >= steps:
                break
        run["epoch_seconds"].append(time.perf_counter() - epoch_start)
        if evaluate:
            run["test_accuracy"].append(accuracy(model, x_test, y_test))
            log(f"[{backend}] epoch {epoch + 1:2d}  loss {sum(run['losses'][-10:]) / len(run['losses'][-10:]):.4f}  "
                f"held-out accuracy {100 * run['test_accuracy'][-1]:.2f}%  {run['epoch_seconds'][-1]:.1f} s")
        if steps is not None and run["steps"] >= steps:
            break
    run["seconds"] = time.perf_counter() - start
    run["model"] = model
    return run


def time_steps(model, x, y, repeats, warmup=3):
    """Median seconds of one training step (forward, backward, Adam)."""
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for n in range(warmup + repeats):
        start = time.perf_counter()
        loss = halcaps.nn.margin_loss(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if x.is_cuda:
            torch.cuda.synchronize()
        if n >= warmup:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for run in runs:
        steps_per_epoch = max(1, run["steps"] // max(1, len(run["test_accuracy"])))
        left.plot(run["losses"], label=run["backend"], alpha=0.8)
        right.plot([steps_per_epoch * (n + 1) for n in range(len(run["test_accuracy"]))],
                   [100 * a for a in run["test_accuracy"]], marker="o", label=run["backend"])
    left.set(xlabel="training step", ylabel="margin loss", yscale="log", title="training loss")
    right.set(xlabel="training step", ylabel="held-out accuracy (%)", title="held-out accuracy")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("CapsNet on sklearn digits")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["halcaps", "torch", "both"], default="halcaps")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch, split among the processes")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help="stop after this many steps")
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads (per process)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--plot", help="write the loss and accuracy curves to this PNG")
    parser.add_argument("--time-steps", type=int, default=0, metavar="N",
                        help="then time N training steps of halcaps, pure PyTorch and torch.compile of it")
    parser.add_argument("--save-params", help="save the trained parameters (rank r of a distributed run: PATH.rank<r>)")
    parser.add_argument("--json", help="write a summary of the run(s) to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    if distributed:
        if args.device.startswith("cuda"):
            local = int(os.environ.get("LOCAL_RANK", 0))
            torch.cuda.set_device(local)
            args.device = f"cuda:{local}"
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    rank = dist.get_rank() if distributed else 0
    log = print if rank == 0 else (lambda *a, **k: None)
    log(f"device {args.device}, {dist.get_world_size() if distributed else 1} process(es), "
        f"{torch.get_num_threads()} torch threads each, halcaps library {halcaps.LIBRARY_FILE}")

    backends = ["halcaps", "torch"] if args.backend == "both" else [args.backend]
    runs = [train(b, args.epochs, args.batch_size, args.lr, args.seed, args.steps, args.device, log) for b in backends]
    for run in runs:
        log(f"[{run['backend']}] held-out accuracy {100 * run['test_accuracy'][-1]:.2f}% after {run['steps']} steps, "
            f"{run['seconds']:.1f} s of training")
    if args.save_params:
        for run in runs:
            suffix = f".rank{rank}" if distributed else ""
            tag = "" if len(runs) == 1 else f".{run['backend']}"
            torch.save({k: v.detach().cpu() for k, v in run["model"].state_dict().items()},
                       args.save_params + tag + suffix)
    if args.plot and rank == 0:
        plot(runs, args.plot)
        log(f"curves written to {args.plot}")

    timings = {}
    if args.time_steps and rank == 0:
        x_train, y_train, _, _ = load_digits_split()
        x, y = x_train[:args.batch_size].to(args.device), y_train[:args.batch_size].to(args.device)
        timings["halcaps"] = time_steps(build("halcaps", args.seed, device=args.device), x, y, args.time_steps)
        timings["torch eager"] = time_steps(build("torch", args.seed, device=args.device), x, y, args.time_steps)
        compiled = torch.compile(build("torch", args.seed, device=args.device))
        timings["torch.compile"] = time_steps(compiled, x, y, args.time_steps, warmup=3)
        for name, seconds in timings.items():
            log(f"training step, batch {args.batch_size}: {name:14s} {1e3 * seconds:8.2f} ms (median of {args.time_steps})")
    if args.json and rank == 0:
        with open(args.json, "w") as out:
            json.dump(dict(runs=[{k: v for k, v in r.items() if k != "model"} for r in runs],
                           step_seconds=timings), out, indent=1)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
