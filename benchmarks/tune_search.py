"""Attribution-ordered tuning against plain bisection and greedy op-by-op fallback, side by side.

For each network (int8 on ``mlu:cnml``, fused; random weights seeded 0, calibrated on its own
random inputs, judged on another one against the float CPU model, bound: the cnml policy's 2 %
rel_mse) and for the ResNet-18 training step (adaptive quantized 8 / 16 / 31 bits, every
gradient within the bound), run the three strategies of ``mluverify.tune`` with the same trial
budget and print: status, layers / ops changed, trials, wall time (attribution included, and
apart), final metric.

Run: PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/tune_search.py [--budget 16] [--size 32]
     [--bound 0.02] [--networks toy,gpt,bert,mobilenet_v3_small,resnet18_training,resnet50,vgg19]
     [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision

import mluverify.device  # noqa: F401  (registers the "mlu" device)
from mluverify.tune import STRATEGIES, tune_inference, tune_training

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites" / "networks"))
from network_models import BertEncoder, GptDecoder  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def images(count: int, seed: int, size: int, batch: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(batch, 3, size, size, generator=generator) - MEAN) / STD for _ in range(count)]


def tokens(count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 512, (2, 16), generator=generator) for _ in range(count)]


def vision(name: str):
    def build(size: int):
        torch.manual_seed(0)
        return getattr(torchvision.models, name)(weights=None).eval(), images(2, 2, size), images(1, 1, size)[0]
    return build


def language(cls):
    def build(size: int):
        torch.manual_seed(0)
        return cls().eval(), tokens(2, 2), tokens(1, 1)[0]
    return build


def toy(size: int):
    """tests/tune/toy_model.py: six linear layers, fc2 and fc4 planted (an outlier input channel)."""
    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tests" / "tune" / "toy_model.py"))
    return script["model"](), script["calibration_inputs"](), script["eval_inputs"]()


INFERENCE = {"toy": toy, "resnet50": vision("resnet50"), "vgg19": vision("vgg19"),
             "mobilenet_v3_small": vision("mobilenet_v3_small"), "mobilenet_v3_large": vision("mobilenet_v3_large"),
             "gpt": language(GptDecoder), "bert": language(BertEncoder)}


def resnet18_training(size: int):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    batch = images(1, 3, size, batch=4)[0]
    target = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(4))
    return model, batch, target


def row(network: str, result, wall: float) -> dict:
    s = result.search
    return {"network": network, "strategy": s.strategy, "status": s.status, "changed": len(s.changes),
            "trials": len(s.trials), "wall_s": round(wall, 1), "attribution_s": round(result.attribution_seconds, 1),
            "metric": s.metric,
            "changes": ", ".join(f"{k.partition(':')[2]}={v}" for k, v in s.changes.items()),
            "trajectory": [[t.phase, len(t.changes), round(t.metric, 5), t.passed] for t in s.trials]}


def run_network(network: str, budget: int, size: int, bound: float) -> list[dict]:
    rows = []
    for strategy in STRATEGIES:
        started = time.perf_counter()
        if network == "resnet18_training":
            model, batch, target = resnet18_training(size)
            result = tune_training(model, batch, target, F.cross_entropy, budget=budget, strategy=strategy,
                                   bound=bound)
        else:
            model, calibration, inputs = INFERENCE[network](size)
            result = tune_inference(model, calibration, inputs, budget=budget, strategy=strategy, bound=bound)
        rows.append(row(network, result, time.perf_counter() - started))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "trajectory"}), flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| network | strategy | status | changed | trials | wall s (attribution s) | final rel_mse |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['network']} | {r['strategy']} | {r['status']} | {r['changed']} | {r['trials']} | "
              f"{r['wall_s']} ({r['attribution_s']}) | {r['metric']:.4g} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--size", type=int, default=32, help="image side of the vision networks")
    parser.add_argument("--bound", type=float, default=0.02, help="rel_mse bound (default: the cnml policy's)")
    parser.add_argument("--networks", default="gpt,bert,mobilenet_v3_small,resnet18_training,resnet50,vgg19")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [r for network in args.networks.split(",") for r in run_network(network, args.budget, args.size, args.bound)]
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
