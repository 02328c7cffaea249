"""``MODEL_SCRIPT``: a Python file that says what to tune, by the names it defines.

Inference: ``model()`` (the float ``nn.Module``), ``calibration_inputs()`` (a list of batches),
``eval_inputs()`` (the batch judged). Training: ``model()``, ``train_inputs()`` (``(inputs,
target)``) and ``loss(output, target)``. A batch is a tensor or a tuple of positional arguments.
"""
from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from mluverify.errors import InvalidArgument

INFERENCE_NAMES = ("model", "calibration_inputs", "eval_inputs")
TRAINING_NAMES = ("model", "train_inputs", "loss")


def load_script(path: str | Path, names: tuple[str, ...]) -> dict[str, Any]:
    """Run the script; return its globals. A missing file or missing names are an error naming them."""
    script = Path(path)
    if not script.is_file():
        raise InvalidArgument(f"model script {str(script)!r} does not exist")
    namespace = runpy.run_path(str(script), run_name="mluverify_tune_script")
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        raise InvalidArgument(f"model script {str(script)!r} defines no {', '.join(f'{n}()' for n in missing)}; "
                              f"a script to tune defines {', '.join(f'{n}()' for n in names)}")
    return namespace
