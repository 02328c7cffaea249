"""Capture the ops of every zoo model once into the shipped cases: ``python -m zoo.capture_zoo
[NAME ...]`` from ``suites/`` (``make capture-zoo`` is not needed: run it after changing the zoo).

Every model (the zoo's seeded weights and inputs) runs one forward under ``torch.no_grad()`` on
the emulated ``mlu`` inside one ``mluverify.dump.capture`` into ``suites/zoo/captured/``
(replaced), so its cases are deduplicated across models: an op with the same normalised
arguments in two models is one case (its ``call_site`` names the first model's source line).
The collector replays them as per-op cases on every target whenever ``suites/zoo`` runs. A
model that raises is reported and left out; the others are captured. Real input values are
kept up to ``MAX_BYTES`` in all, recipes past it.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import torch

from .zoo_models import eager, find_models, zoo_models

CAPTURED = Path(__file__).resolve().parent / "captured"
MAX_BYTES = 2 << 20


def _on_device(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(tensor.to("mlu") for tensor in tensors)


def main(names: list[str]) -> None:
    import mluverify.device  # noqa: F401  (registers "mlu")
    from torch.utils._python_dispatch import _disable_current_modes

    from mluverify.dump import capture

    models = find_models(names) if names else list(zoo_models().values())
    shutil.rmtree(CAPTURED, ignore_errors=True)
    with capture(CAPTURED, model="zoo", max_bytes=MAX_BYTES) as recording:
        for model in models:
            started = time.perf_counter()
            try:
                # Built outside the capture (its random initialisation is not the model's ops) and
                # one at a time: all of them at once would not fit in memory.
                with _disable_current_modes():
                    module, inputs = eager(model)
                    module, inputs = module.to("mlu"), _on_device(inputs)
            except Exception as exc:
                print(f"{model.name}: left out, it does not build: {type(exc).__name__}: {exc}", flush=True)
                continue
            try:
                with torch.no_grad():
                    module(*inputs)
            except Exception as exc:
                print(f"{model.name}: raised on the device, its ops up to the error kept: {type(exc).__name__}: {exc}")
            del module, inputs
            print(f"{model.name}: captured ({time.perf_counter() - started:.1f} s)", flush=True)
    print(f"zoo: {recording.cases} unique cases of {recording.ops} ops from {len(models)} models")


if __name__ == "__main__":
    main(sys.argv[1:])
