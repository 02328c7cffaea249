"""The seeds' MNIST flow as a task: the seeds' ``Net`` trained briefly on handwritten digits that
ship inside scikit-learn, its accuracy judged per dtype x quantization (float32, int8, int16).

MNIST cannot be downloaded here; scikit-learn's digits (1797 images, 8x8, values 0..16, read by
``sklearn.datasets.load_digits`` from the installed package) stand in for it at their own size,
so a case trains in about 2 s on one CPU core. The network is the seeds' MNIST ``Net``
(``network_models.Net``: conv 3x3 x32, conv 3x3 x64, max-pool 2, dropout, fc 128, fc 10,
log-softmax) with ``fc1`` sized for 8x8 inputs (64 x 2 x 2 = 256 inputs instead of 9216). A seeded split keeps every other
image for testing (899 test images, 898 for training); Adam (learning rate 5e-3, batches of 64,
8 epochs, seed 0) on one thread makes the same weights on any machine with the pinned torch.

``python suites/networks/digits_task.py`` measures the references registered in
``task_references.toml``: the float32 network's accuracy on the CPU, each quantized network's
(the seeds' calibrate -> checkpoint -> load flow) on the emulated MLU (``mlu``, layer by layer),
where its int8 / int16 arithmetic runs, and every precision's top-1 agreement with the CPU on
the emulated MLU, the lowest over its core versions.
"""
from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from network_models import Net

REFERENCES = Path(__file__).with_name("task_references.toml")
MODEL = "digits_mnist_net"
SEED = 0
EPOCHS, BATCH, LEARNING_RATE = 8, 64, 5e-3


def digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train images, train labels, test images, test labels): images N x 1 x 8 x 8 in 0..1."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.from_numpy(data.images).float().unsqueeze(1) / 16.0
    labels = torch.from_numpy(data.target).long()
    order = torch.from_numpy(np.random.RandomState(SEED).permutation(len(images)))
    test, train = order[::2], order[1::2]
    return images[train], labels[train], images[test], labels[test]


@contextmanager
def one_thread():
    """One intra-op thread: the same sums in the same order on any machine (and no thread
    oversubscription on a shared, loaded host)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def trained_net(images: torch.Tensor, labels: torch.Tensor) -> Net:
    """``Net`` trained on the CPU (seeded), in eval mode."""
    with one_thread(), warnings.catch_warnings():
        # the seed's Net applies Dropout2d to the 2-D output of fc1, which torch deprecates
        warnings.filterwarnings("ignore", "dropout2d", UserWarning)
        torch.manual_seed(SEED)
        net = Net(side=images.shape[-1])
        optimizer = torch.optim.Adam(net.parameters(), LEARNING_RATE)
        shuffle = torch.Generator().manual_seed(SEED)
        for _ in range(EPOCHS):
            order = torch.randperm(len(images), generator=shuffle)
            for start in range(0, len(images), BATCH):
                batch = order[start:start + BATCH]
                optimizer.zero_grad()
                F.nll_loss(net(images[batch]), labels[batch]).backward()
                optimizer.step()
    return net.eval()


def deployed(net: nn.Module, calibration: torch.Tensor, quant: str) -> nn.Module:
    """The seeds' quantization flow: calibrate on the CPU (``gen_quant=True``), save the
    state_dict, load it into a fresh ``quantize_dynamic_mlu`` model; ``""``: ``net`` itself."""
    if not quant:
        return net
    from mluverify.device.quantization import quantize_dynamic_mlu

    with torch.no_grad():
        calibrating = quantize_dynamic_mlu(net, {"iteration": 1}, dtype=quant, gen_quant=True)
        calibrating(calibration)
    runnable = quantize_dynamic_mlu(net, None, dtype=quant)
    runnable.load_state_dict(copy.deepcopy(calibrating.state_dict()))
    return runnable.eval()


def top1(model: nn.Module, images: torch.Tensor, device: str = "cpu") -> torch.Tensor:
    with torch.no_grad(), one_thread():
        return copy.deepcopy(model).to(device)(images.to(device)).cpu().argmax(1)


def main() -> None:
    import mluverify.device.mlu_model as ct  # registers "mlu"
    warnings.filterwarnings("ignore", "dropout2d", UserWarning)  # the seed's Net: Dropout2d on 2-D input

    train_images, train_labels, test_images, test_labels = digits()
    net = trained_net(train_images, train_labels)
    on_cpu = top1(net, test_images)
    print(f"[{MODEL}] {len(test_images)} test images")
    print(f"accuracy float32 (CPU): {float((on_cpu == test_labels).float().mean()):.4f}")
    for quant in ("", "int8", "int16"):
        runnable, key = deployed(net, train_images, quant), f"float32:{quant}" if quant else "float32"
        on_mlu = {}
        for core in ("MLU270", "MLU370"):
            ct.set_core_version(core)
            on_mlu[core] = top1(runnable, test_images, "mlu")
        for core, top in on_mlu.items():
            print(f"{key} on mlu (cnnl, {core}): accuracy {float(top.eq(test_labels).float().mean()):.4f}, "
                  f"top-1 agreement with the CPU {float(top.eq(on_cpu).float().mean()):.4f}")


if __name__ == "__main__":
    main()
