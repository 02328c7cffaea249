"""``MODEL_SCRIPT``: a Python file that says what to tune, by the names it defines.

Inference: ``model()`` (the float ``nn.Module``), ``calibration_inputs()`` (a list of batches),
``eval_inputs()`` (the batch judged). Training: ``model()``, ``train_inputs()`` (``(inputs,
target)``) and ``loss(output, target)``. A batch is a tensor or a tuple of positional arguments.
``mluverify tune`` runs it with its folder first on ``sys.path`` (as ``python script.py``
would), so it imports the modules beside it.
"""
from __future__ import annotations

import functools
import runpy
import traceback
from pathlib import Path
from typing import Any, Callable

from mluverify.errors import InvalidArgument

INFERENCE_NAMES = ("model", "calibration_inputs", "eval_inputs")
TRAINING_NAMES = ("model", "train_inputs", "loss")
# Defined by some scripts, called by some options (``--task accuracy``).
OPTIONAL_NAMES = ("eval_labels",)


def load_script(path: str | Path, names: tuple[str, ...]) -> dict[str, Any]:
    """Run the script; return its globals, the functions mluverify calls wrapped so that an
    exception they raise is an ``InvalidArgument`` naming the script, the function and the
    line. A missing file, missing names or a script that raises are errors naming them."""
    script = Path(path)
    if not script.is_file():
        raise InvalidArgument(f"model script {str(script)!r} does not exist")
    namespace = _guarded(script, "running it", runpy.run_path)(str(script), run_name="mluverify_tune_script")
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        raise InvalidArgument(f"model script {str(script)!r} defines no {', '.join(f'{n}()' for n in missing)}; "
                              f"a script to tune defines {', '.join(f'{n}()' for n in names)}")
    called = [name for name in (*names, *OPTIONAL_NAMES) if callable(namespace.get(name))]
    return namespace | {name: _guarded(script, f"{name}()", namespace[name]) for name in called}


def _guarded(script: Path, what: str, fn: Callable) -> Callable:
    """``fn`` raising ``InvalidArgument`` (naming ``script``, ``what`` and the script's line)
    in place of any exception, so the command exits 2 with one line, not a traceback."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise InvalidArgument(f"model script {str(script)!r} raised {type(exc).__name__}: {exc} "
                                  f"({what}{_line_in(script, exc)})") from exc

    return call


def _line_in(script: Path, exc: BaseException) -> str:
    """``, line N``: the script's last line in the exception's traceback ("" if none)."""
    resolved = script.resolve()
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__)
             if Path(frame.filename).resolve() == resolved]
    return f", line {lines[-1]}" if lines else ""
