"""Tuning on a real int8 runtime (``ort:int8``; ``openvino:int8`` plugs in the same way): which
quantized layers to keep in float, the answer in the runtime's own terms (ORT's
``nodes_to_exclude``), by the same search and objectives as on the emulator.

A runtime is an ``Int8Runtime``: it names its quantized layers, scores each one's own error
from one run of the fully quantized model (its ``layer_errors`` view), quantizes and runs the
model with a given set kept in float, and writes its answer as the files its own tool takes
plus a pytest case. ``RUNTIMES`` maps a target to the class (imported only when asked for).
"""
from __future__ import annotations

import copy
import difflib
import importlib
from typing import Any, Mapping, Protocol, Sequence

import torch
import torch.nn as nn

from mluverify.core.task import Task
from mluverify.errors import InvalidArgument, valid_choice
from mluverify.tune._api import Attribution, TuneResult, message
from mluverify.tune._inference import as_args
from mluverify.tune._objective import Objective
from mluverify.tune._search import Config, Knob, check_budget, search

# target -> "module:class" of its Int8Runtime
RUNTIMES = {"ort:int8": "mluverify.tune._ort:OrtInt8Runtime",
            "openvino:int8": "mluverify.tune._openvino:OpenVinoInt8Runtime"}
LADDER = ("int8", "float")
KIND = "runtime"


class Int8Runtime(Protocol):
    """What the tuner needs from a real int8 runtime, built as ``cls(model, calibration, args,
    options)`` (``options``: its quantizer's settings, e.g. ``scheme``; an unknown one is an
    InvalidArgument listing the choices)."""

    target: str
    # the quantizer settings it takes (``options``' keys)
    options: tuple[str, ...]
    # the answer's key for the layers kept in float, in the runtime's terms ("nodes_to_exclude")
    keep_float_key: str

    def layers(self) -> list[str]:
        """The layers the runtime quantizes, by its own names, in graph order."""

    def scores(self) -> dict[str, float]:
        """Layer name -> its own error in the fully quantized model (from one run)."""

    def run(self, keep_float: Sequence[str]) -> Any:
        """The model quantized with ``keep_float`` in float, run on the judged inputs (CPU tensors)."""

    def answer(self, keep_float: Sequence[str]) -> dict[str, Any]:
        """The answer in the runtime's terms: what its own tool takes."""

    @staticmethod
    def files(data: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, str]:
        """File name -> text: the answer file(s) and the pytest case (``test_tuned.py``) that
        replays it in a fresh process (``fields``: script, script_name, bound)."""


def runtime_class(target: str) -> type:
    """The ``Int8Runtime`` class of ``target`` (InvalidArgument listing the targets)."""
    if target not in RUNTIMES:
        raise valid_choice("int8 runtime target", target, tuple(RUNTIMES))
    module, _, name = RUNTIMES[target].partition(":")
    return getattr(importlib.import_module(module), name)


def tune_runtime(target: str, model: nn.Module, calibration: Sequence[Any], inputs: Any, *,
                 bound: float, budget: int, strategy: str = "attribution", start: Mapping[str, Any] | None = None,
                 task: Task | None = None, options: Mapping[str, Any] | None = None) -> TuneResult:
    """The fewest layers of ``model`` to keep in float so that, quantized and run by ``target``'s
    int8 runtime (calibrated on ``calibration``), it meets ``bound`` (rel_mse against the float
    model on the CPU) or ``task``'s gate on ``inputs``, in at most ``budget`` trials.

    :param start: a starting configuration, ``{runtime.keep_float_key: [layer, ...]}``.
    :param options: the runtime quantizer's settings (``ort:int8``: ``scheme``, ``granularity``;
        ``openvino:int8``: ``preset``, ``granularity``).
    """
    check_budget(budget)
    if not calibration:
        raise InvalidArgument("tuning needs at least one calibration batch")
    args = as_args(inputs)
    model = copy.deepcopy(model).eval()  # the user's model keeps its mode
    cls = runtime_class(target)
    for option in options or {}:
        if option not in cls.options:
            raise valid_choice(f"{target} quantizer option", option, cls.options)
    runtime = cls(model, list(calibration), args, dict(options or {}))
    objective = Objective(_float_output(model, args), bound, task)
    knobs = [Knob("layer", name, LADDER) for name in runtime.layers()]
    start_config = _start_config(start, runtime, knobs)
    attribution = Attribution(strategy, lambda rung: _scores(runtime, rung))
    result = search(strategy, knobs, lambda config: objective.judge(runtime.run(_kept(config, knobs))),
                    bound=objective.judged_bound, budget=budget, attribute=attribution, start=start_config,
                    predict=False)  # a layer's own error is not in the output's units: it only ranks
    answer = runtime.answer([key.partition(":")[2] for key in result.changes])
    return TuneResult(result, answer, message(result, budget, objective.metric_name), KIND, attribution.scores,
                      attribution.seconds, objective.metric_name, objective.task_data())


def _float_output(model: nn.Module, args: tuple) -> Any:
    with torch.no_grad():
        return model(*args)


def _scores(runtime: Int8Runtime, rung: int) -> dict[str, float]:
    """Rung 0 ranks by each layer's own int8 error; a float layer has none."""
    return {f"layer:{name}": error for name, error in runtime.scores().items()} if rung == 0 else {}


def _kept(config: Config, knobs: Sequence[Knob]) -> list[str]:
    """The layers a configuration keeps in float, in graph order."""
    return [knob.name for knob in knobs if config.get(knob.key, 0) > 0]


def _start_config(start: Mapping[str, Any] | None, runtime: Int8Runtime, knobs: Sequence[Knob]) -> Config:
    """``{keep_float_key: [layer, ...]}`` as a configuration; an unknown key or layer is an
    error naming it and the closest layer names."""
    if not start:
        return {}
    key = runtime.keep_float_key
    unknown_keys = sorted(set(start) - {key})
    if unknown_keys:
        raise InvalidArgument(f"unknown starting-config keys {', '.join(map(repr, unknown_keys))} for "
                              f"{runtime.target}; valid: {key!r}")
    names = [knob.name for knob in knobs]
    for name in start[key]:
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.5)
            raise InvalidArgument(f"the starting config's {key} names {name!r}, not a layer {runtime.target} "
                                  f"quantizes in the model; closest: {', '.join(map(repr, close)) or '(none)'}; "
                                  f"known: {', '.join(names)}")
    return {f"layer:{name}": 1 for name in start[key]}


__all__ = ["Int8Runtime", "RUNTIMES", "runtime_class", "tune_runtime"]
