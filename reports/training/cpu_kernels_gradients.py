"""The CPU's own gradients of the training suite's ResNet18 steps under torch's AVX-512 and AVX2
kernels, on the same parameters (docs/training.md, "Why ResNet18 trains on 64x64 images"): the
AVX-512 run takes each step's starting parameters from the CPU's training trajectory and saves
them, the AVX2 run (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``) loads them; printed per
step, the worst rel_mse between the two runs' gradients (the judge's metric without its eps
rule, which would zero the smallest). Small figures say
the CPU's gradient is well-conditioned, so a device comparison that moves between the two kernels
moves with the trajectory it starts from. Run on a CPU with AVX-512.
    .venv/bin/python reports/training/cpu_kernels_gradients.py [image side, default the suite's 64]
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

SUITE = Path(__file__).parents[2] / "suites" / "training"
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
STEPS = 3


def gradients(side: int, states: Path, save: bool) -> list[dict[str, torch.Tensor]]:
    """Each step's parameter gradients of ResNet18 on ``side`` x ``side`` images, from the
    trajectory's parameters (saved to ``states``) or from those ``states`` hold."""
    sys.path[:0] = [str(SUITE), str(SUITE.parent / "networks")]
    import test_training as suite

    resnet = next(t for t in suite.TRAININGS if t.name == "resnet18_small")
    resnet = resnet._replace(batch=suite._images((4, 3, side, side), 10))
    steps = []
    for step in range(STEPS):
        model, batch = suite._state_before(resnet, step)
        state_file = states / f"step{step}.pt"
        if save:
            torch.save(model.state_dict(), state_file)
        else:
            model.load_state_dict(torch.load(state_file))
        model.zero_grad(set_to_none=True)  # the trajectory's last step leaves its gradients
        torch.manual_seed(step)
        model(*batch).backward()
        steps.append({name: p.grad.clone() for name, p in model.named_parameters()})
    return steps


def rel_mse(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.double(), expected.double()
    return float((((actual - expected) ** 2).sum() / (expected ** 2).sum().clamp_min(1e-300)).sqrt())


def main(side: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for kernels, save in ((None, "save"), (AVX2, "load")):
            subprocess.run([sys.executable, __file__, str(side), save, folder], check=True,
                           env={**os.environ, **(kernels or {})})
        avx512, avx2 = (torch.load(Path(folder) / f"{save}.pt") for save in ("save", "load"))
    for step, (first, second) in enumerate(zip(avx512, avx2)):
        worst = max(rel_mse(second[name], first[name]) for name in first)
        print(f"{side}x{side} step {step}: worst rel_mse between the AVX2 and AVX-512 gradients {worst:.2e}")


if __name__ == "__main__":
    image_side = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    if len(sys.argv) > 2:  # one run, under the kernels its parent chose
        mode, folder = sys.argv[2], Path(sys.argv[3])
        torch.save(gradients(image_side, folder, mode == "save"), folder / f"{mode}.pt")
    else:
        main(image_side)
