"""``mluverify tune --target ort:int8`` side by side with NNCF's ``quantize_with_accuracy_control``.

Both tools get the same float ONNX model (the export ``ort:int8`` makes, one sample per run),
the same calibration samples, the same validation samples, the same metric and the same bound:

* rel_mse of the int8 model's output against the float model's (random-weight networks: no
  labels): NNCF's ``validation_fn`` returns ``1 - rel_mse``, so its absolute ``max_drop`` is the
  rel_mse bound; mluverify judges rel_mse by the ``cnml`` policy with that ``--bound``;
* accuracy against the true labels (the seeds' MNIST ``Net`` trained on scikit-learn's digits):
  mluverify's task gate (``--task accuracy:<float accuracy>:<effect>``) requires ``threshold``
  right, and NNCF's ``max_drop`` is set to ``float accuracy - threshold``, the same line.

The bound is chosen so that both tools' untuned int8 models fail it: half the smaller of the two
untuned drops (each tool's plain quantization, measured first and not counted for either).

Per network it prints, per tool: the weighted layers (Conv, Gemm, MatMul) kept in float, the
validation runs (mluverify: its trials, each a full validation, plus the one run its ranking
reads; NNCF: its full validations, plus its ranking's per-sample runs in validation-set
equivalents), wall seconds (mluverify's include its own export; NNCF is handed the exported
model) and the final metric, measured on each tool's final model by the same function.

Needs NNCF (``pip install 'mluverify[openvino-int8]'``) beside onnxruntime. Figures and how they
were measured: docs/tuning.md.

Run: PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/tune_vs_nncf.py [--networks digits,resnet18,...]
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime
import torch
from torch import nn

from mluverify import Task, TaskBudget
from mluverify.tune import tune_runtime
from mluverify.tune._ort import DISABLED_OPTIMIZERS, OrtInt8Runtime, exported_float, split_samples

WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass
class Network:
    """A model, its calibration and validation batches (samples first) and, for accuracy, labels."""

    model: nn.Module
    calibration: torch.Tensor
    validation: torch.Tensor
    labels: torch.Tensor | None = None


def _images(count: int, size: int, seed: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(count, channels, size, size, generator=torch.Generator().manual_seed(seed))


def resnet18() -> Network:
    import torchvision

    torch.manual_seed(0)
    return Network(torchvision.models.resnet18(num_classes=10).eval(), _images(32, 32, 1), _images(64, 32, 2))


def mobilenet_v3_small() -> Network:
    import torchvision

    torch.manual_seed(0)
    return Network(torchvision.models.mobilenet_v3_small(num_classes=10).eval(), _images(32, 64, 1),
                   _images(64, 64, 2))


class BertLike(nn.Module):
    """A BERT-style encoder at the size of ``suites/networks``' ``BertEncoder`` (vocabulary 512,
    width 64, 4 heads, 2 post-LN layers with GELU, tanh pooler on the first token; its pooled
    output), written with its attention's shapes as constants: ``nn.MultiheadAttention``'s export
    computes its reshapes from ``Shape`` ops, on which onnxruntime's ``quant_pre_process`` fails
    (its symbolic shape inference asserts in ``_infer_Reshape``). The token ids come in as float
    (the feeds here are float) and are cast back."""

    def __init__(self, vocab: int = 512, width: int = 64, heads: int = 4, layers: int = 2, length: int = 16) -> None:
        super().__init__()
        self.heads, self.length, self.width = heads, length, width
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.ln = nn.LayerNorm(width)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "qkv": nn.Linear(width, 3 * width), "out": nn.Linear(width, width), "ln1": nn.LayerNorm(width),
            "up": nn.Linear(width, 4 * width), "down": nn.Linear(4 * width, width), "ln2": nn.LayerNorm(width)})
            for _ in range(layers))
        self.pooler = nn.Linear(width, width)

    def _attention(self, block: nn.ModuleDict, hidden: torch.Tensor) -> torch.Tensor:
        split = (-1, self.length, self.heads, self.width // self.heads)
        q, k, v = (t.reshape(split).transpose(1, 2) for t in block["qkv"](hidden).chunk(3, dim=-1))
        weights = torch.softmax(q @ k.transpose(-1, -2) / (self.width // self.heads) ** 0.5, dim=-1)
        return block["out"]((weights @ v).transpose(1, 2).reshape(-1, self.length, self.width))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.ln(self.tokens(ids.long()) + self.positions.weight)
        for block in self.blocks:
            hidden = block["ln1"](hidden + self._attention(block, hidden))
            hidden = block["ln2"](hidden + block["down"](nn.functional.gelu(block["up"](hidden))))
        return torch.tanh(self.pooler(hidden[:, 0]))


def bert() -> Network:
    torch.manual_seed(0)
    model = BertLike().eval()
    tokens = torch.Generator().manual_seed(1)
    return Network(model, torch.randint(0, 512, (32, 16), generator=tokens).float(),
                   torch.randint(0, 512, (64, 16), generator=tokens).float())


def digits() -> Network:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites" / "networks"))
    from digits_task import digits as load_digits, trained_net

    warnings.filterwarnings("ignore", "dropout2d", UserWarning)
    train_images, train_labels, test_images, test_labels = load_digits()
    return Network(trained_net(train_images, train_labels), train_images, test_images, test_labels)


NETWORKS: dict[str, Callable[[], Network]] = {"digits": digits, "resnet18": resnet18,
                                              "mobilenet_v3_small": mobilenet_v3_small, "bert": bert}


class Metric:
    """The metric both tools judge by, on per-sample outputs: ``1 - rel_mse`` against the float
    model's outputs, or accuracy against the labels (higher is better for both)."""

    def __init__(self, network: Network, accuracy: bool) -> None:
        with torch.no_grad():
            self.reference = network.model(network.validation).numpy().astype(np.float64)
        self.labels = network.labels.numpy() if accuracy else None

    def __call__(self, outputs: np.ndarray, indices: list[int]) -> float:
        if self.labels is not None:
            return float(np.mean(outputs.reshape(len(indices), -1).argmax(1) == self.labels[indices]))
        expected = self.reference[indices]
        return 1.0 - float(np.sqrt(np.sum((outputs - expected) ** 2) / np.sum(expected ** 2)))


class CountedValidation:
    """NNCF's ``validation_fn``: runs the model on the items (``(index, feed)``) in one session
    (cached per model), scores them; counts full validations and the items its ranking ran."""

    def __init__(self, metric: Metric, size: int) -> None:
        self.metric, self.size = metric, size
        self.full_runs = self.items = 0
        self._session: tuple[Any, Any] | None = None

    def __call__(self, model: onnx.ModelProto, items) -> float:
        if self._session is None or self._session[0] is not model:
            self._session = (model, onnxruntime.InferenceSession(
                model.SerializeToString(), providers=["CPUExecutionProvider"],
                disabled_optimizers=list(DISABLED_OPTIMIZERS)))
        session = self._session[1]
        items = list(items)
        outputs = np.concatenate([session.run(None, feed)[0] for _, feed in items]).astype(np.float64)
        if len(items) == self.size:
            self.full_runs += 1
        else:
            self.items += len(items)
        return self.metric(outputs, [index for index, _ in items])


def _feeds(batch: torch.Tensor) -> list[dict]:
    return [{"input0": sample[0].numpy()} for sample in split_samples((batch,))]


def float_layers(model: onnx.ModelProto) -> list[str]:
    """The weighted nodes of ``model`` that take no dequantized input: they run in float."""
    dequantized = {node.output[0] for node in model.graph.node if node.op_type == "DequantizeLinear"}
    return [node.name for node in model.graph.node
            if node.op_type in WEIGHTED and not any(name in dequantized for name in node.input)]


def _nncf_run(float_model: onnx.ModelProto, network: Network, metric: Metric, max_drop: float | None):
    """NNCF's quantization (with accuracy control when ``max_drop`` is given): the model, the
    counted validation, the wall seconds."""
    import nncf

    calibration = nncf.Dataset(_feeds(network.calibration))
    validation = CountedValidation(metric, len(network.validation))
    started = time.perf_counter()
    if max_drop is None:
        model = nncf.quantize(float_model, calibration, subset_size=len(network.calibration))
    else:
        items = list(enumerate(_feeds(network.validation)))
        model = nncf.quantize_with_accuracy_control(
            float_model, calibration, nncf.Dataset(items), validation, max_drop=max_drop,
            drop_type=nncf.DropType.ABSOLUTE, subset_size=len(network.calibration))
    return model, validation, time.perf_counter() - started


def _score(model: onnx.ModelProto, network: Network, metric: Metric) -> float:
    validation = CountedValidation(metric, len(network.validation))
    return validation(model, list(enumerate(_feeds(network.validation))))


def compare_tools(name: str, network: Network, granularity: str, budget: int, accuracy: bool) -> list[dict]:
    metric = Metric(network, accuracy)
    options = {"granularity": granularity}
    with tempfile.TemporaryDirectory() as folder:
        float_model = onnx.load(str(exported_float(network.model, split_samples((network.validation,))[0],
                                                   Path(folder) / "float.onnx")))
    float_value = _score(float_model, network, metric)
    ort = OrtInt8Runtime(network.model, [network.calibration], (network.validation,), options)
    indices = list(range(len(network.validation)))
    ort_untuned = metric(ort.run(()).numpy().astype(np.float64), indices)
    nncf_untuned_model, _, _ = _nncf_run(float_model, network, metric, None)
    nncf_untuned = _score(nncf_untuned_model, network, metric)
    name = f"{name} ({'accuracy' if accuracy else '1 - rel_mse'})"
    print(f"[{name}] float {float_value:.4f}; untuned int8: ort {ort_untuned:.4f}, nncf {nncf_untuned:.4f}", flush=True)
    if max(ort_untuned, nncf_untuned) >= float_value:
        print(f"[{name}] an untuned int8 model keeps the float metric: no bound both miss, nothing to compare")
        return []
    task, max_drop, bound = _bound(metric, network, float_value, max(ort_untuned, nncf_untuned))
    print(f"[{name}] bound: metric >= {float_value - max_drop:.4f} (max_drop {max_drop:.4g})", flush=True)

    started = time.perf_counter()
    result = tune_runtime("ort:int8", network.model, [network.calibration], network.validation, bound=bound,
                          budget=budget, task=task, options=options)
    ours_seconds = time.perf_counter() - started
    kept = result.answer["quantize_static"]["nodes_to_exclude"]
    weighted = {node.name for node in float_model.graph.node if node.op_type in WEIGHTED}
    ours_final = metric(ort.run(kept).numpy().astype(np.float64), indices)

    nncf_model, validation, nncf_seconds = _nncf_run(float_model, network, metric, max_drop)
    nncf_final = _score(nncf_model, network, metric)
    nncf_kept = len(float_layers(nncf_model)) - len(float_layers(nncf_untuned_model))
    size = len(network.validation)
    return [
        {"network": name, "tool": "mluverify tune (ort:int8)", "kept": len([n for n in kept if n in weighted]),
         "kept_all": len(kept), "runs": f"{len(result.search.trials)} + {1 if result.scores else 0} (ranking)",
         "seconds": ours_seconds,
         "final": ours_final, "met": ours_final >= float_value - max_drop, "status": result.search.status},
        {"network": name, "tool": "NNCF quantize_with_accuracy_control", "kept": nncf_kept, "kept_all": nncf_kept,
         "runs": f"{validation.full_runs} + {validation.items / size:.1f} (ranking: {validation.items} samples)",
         "seconds": nncf_seconds, "final": nncf_final, "met": nncf_final >= float_value - max_drop, "status": ""},
    ]


def _bound(metric: Metric, network: Network, float_value: float, best_untuned: float,
           ) -> tuple[Task | None, float, float]:
    """(mluverify's task or None, NNCF's max_drop, mluverify's rel_mse bound): the same line,
    half way between the float model and the better untuned int8 model (so both miss it)."""
    drop = float_value - best_untuned
    if metric.labels is None:
        return None, drop / 2, drop / 2
    samples = len(network.validation)
    effect = (drop / 2) / float_value  # the task gate sized for half the untuned drop
    task = Task("accuracy", reference=float_value, labels=network.labels, budget=TaskBudget(effect_share=effect))
    threshold = task.threshold(samples, "digits").threshold
    return task, float_value - threshold, drop / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--granularity", default="per-channel",
                        help="ort:int8 weight scales (NNCF quantizes weights per channel)")
    parser.add_argument("--budget", type=int, default=32)
    args = parser.parse_args()
    logging.getLogger("nncf").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    print("| network | tool | weighted layers kept in float (all nodes) | validation runs | wall s | final metric "
          "| within the bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.networks.split(","):
        network = NETWORKS[name]()
        for accuracy in (True, False) if network.labels is not None else (False,):
            for row in compare_tools(name, network, args.granularity, args.budget, accuracy):
                print(f"| {row['network']} | {row['tool']} | {row['kept']} ({row['kept_all']}) | {row['runs']} | "
                      f"{row['seconds']:.1f} | {row['final']:.4f} | {'yes' if row['met'] else 'no'} {row['status']} |",
                      flush=True)

if __name__ == "__main__":
    main()
