"""Built-in plugin: TorchInductor targets, ``cpu:inductor`` and ``cuda:inductor``.

Each case runs ``torch.compile(fn, backend="inductor", dynamic=False)`` under ``torch.no_grad()``
(inference), judged by the ``cnml`` policy: a compiler's fused kernels, reordered reductions and
vectorised math deviate from eager the way the MLU's fused (CNML / MagicMind) mode deviates from
its layer-by-layer (CNNL) mode. The record says how the case compiled: ``compile_s`` (time spent
compiling, from TorchDynamo's compilation metrics), ``graph_breaks``, ``recompiles``, and
``executed_as`` (``fused``: one graph or several without a break; ``partially fused``: graph
breaks ran Python between graphs; ``layer-by-layer``: nothing was compiled).

Compiled code is reused across cases and runs through Inductor's own caches (FX graph and
AOTAutograd caches, compiled C++ / Triton kernels) in ``TORCHINDUCTOR_CACHE_DIR``, by default
``$XDG_CACHE_HOME/mluverify/inductor`` (``~/.cache/mluverify/inductor``). TorchDynamo is reset
before each case, so a case's graph breaks and recompiles are its own, whatever ran before it.

Inductor options (``torch.compile(options=...)``) come from the JSON object in the environment
variable ``MLUVERIFY_INDUCTOR_OPTIONS``, or from ``InductorRunner(options=...)`` for a mode a
plugin adds. An unknown option, or a compile that fails, errors the case with the case id and
the compiler's first line; the run goes on.
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mluverify.core.backends import BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.errors import BackendError, InvalidArgument
from mluverify.core.hookspecs import hookimpl
from mluverify.plugins.torch_devices import TorchDeviceBackend, with_fp32_precision

OPTIONS_ENV = "MLUVERIFY_INDUCTOR_OPTIONS"
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
POLICY = "cnml"
# Enough entries that no case's compiled frames fall out of TorchDynamo's metrics (default 64).
_METRICS_LIMIT = 4096


def default_cache_dir() -> Path:
    """Where Inductor's caches go unless ``TORCHINDUCTOR_CACHE_DIR`` says otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mluverify" / "inductor"


def use_cache_dir() -> str:
    """Point Inductor at its cache directory (``TORCHINDUCTOR_CACHE_DIR``, set to the default
    when unset); return the directory. Called before anything of Inductor's runs: its first
    look-up writes its own default (under /tmp) into the variable."""
    return os.environ.setdefault(CACHE_ENV, str(default_cache_dir()))


def cpp_compiler_missing() -> str | None:
    """Why Inductor cannot compile C++ here (no working compiler), or None."""
    use_cache_dir()  # the compiler search takes a lock in the cache directory
    from torch._inductor import cpp_builder
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        cpp_builder.get_cpp_compiler()
    except InvalidCxxCompiler as exc:
        return f"TorchInductor needs a C++ compiler for the CPU: {exc} (install g++ or set CXX)"
    return None


def options_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The Inductor options in ``MLUVERIFY_INDUCTOR_OPTIONS`` (a JSON object; unset: none)."""
    text = environ.get(OPTIONS_ENV, "").strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{OPTIONS_ENV}={text!r} is not JSON: {exc}; write a JSON object, "
                              f"e.g. '{{\"max_autotune\": true}}'") from None
    if not isinstance(options, dict):
        raise InvalidArgument(f"{OPTIONS_ENV}={text!r} is a JSON {type(options).__name__}, not an object "
                              f"of Inductor options, e.g. '{{\"max_autotune\": true}}'")
    return options


def check_options(options: Mapping[str, Any], known: list[str], where: str) -> None:
    """InvalidArgument naming the first unknown option, its closest known ones and ``where``."""
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
            raise InvalidArgument(f"{where}: unknown Inductor option {name!r}; {hint}"
                                  f"torch._inductor.list_options() lists the valid ones")


def compiler_message(exc: BaseException) -> str:
    """The first line that says what went wrong in a compile error: for a failed C++ compile
    the compiler's first error line, else the innermost cause's first line."""
    from torch._inductor.exc import CppCompileError

    root = exc
    while not isinstance(root, CppCompileError) and (
            inner := getattr(root, "inner_exception", None) or root.__cause__) is not None:
        root = inner
    text = root.output if isinstance(root, CppCompileError) else str(root)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return f"{type(root).__name__}: {first}"


class CompileWatch:
    """What TorchDynamo / Inductor compiled inside a ``with`` block, from their counters and
    compilation metrics: compile time, graphs, graph breaks (with their reasons), recompiles."""

    def __enter__(self) -> "CompileWatch":
        from torch._dynamo import utils

        utils.set_compilation_metrics_limit(_METRICS_LIMIT)
        utils.clear_compilation_metrics()
        self._before = self._counts()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        from torch._dynamo import utils

        self.metrics = utils.get_compilation_metrics()
        after = self._counts()
        self.graphs = after["graphs"] - self._before["graphs"]
        # A frame TorchDynamo could not trace at all runs eagerly: a break as well as a graph break.
        skipped = [m.fail_reason for m in self.metrics if m.fail_type and not m.has_guarded_code]
        self.graph_breaks = after["graph_breaks"] - self._before["graph_breaks"] + len(skipped)
        self.break_reasons = [reason for reason, count in after["reasons"].items()
                              if count > self._before["reasons"].get(reason, 0)] + skipped

    @staticmethod
    def _counts() -> dict[str, Any]:
        from torch._dynamo.utils import counters

        reasons = dict(counters["graph_break"])
        return {"graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(reasons.values()),
                "reasons": reasons}

    @property
    def compile_s(self) -> float:
        return sum(m.entire_frame_compile_time_s or 0.0 for m in self.metrics)

    @property
    def recompiles(self) -> int:
        return sum(1 for m in self.metrics if m.recompile_reason)

    def execution(self, output: Any) -> Execution:
        """The case's Execution: how much was compiled, and why not all of it."""
        info = {"compile_s": self.compile_s, "graph_breaks": self.graph_breaks, "recompiles": self.recompiles}
        first = (self.break_reasons[0] or "").strip().splitlines()[:1] if self.break_reasons else []
        why = f"first: {first[0]}" if first else "no reason recorded"
        if self.graph_breaks and not self.graphs:
            return Execution(output, executed_as="layer-by-layer", info=info,
                             not_fused_reason=f"TorchDynamo compiled no graph, the case ran eagerly ({why})")
        if self.graph_breaks:
            return Execution(output, executed_as="partially fused", info=info,
                             not_fused_reason=f"{self.graph_breaks} graph break(s), {why}")
        # No graph and no break: nothing to compute (e.g. eval-mode dropout), TorchDynamo's
        # guarded code is the whole case.
        return Execution(output, executed_as="fused", info=info)


def compile_fresh(fn: Callable, options: Mapping[str, Any] | None = None) -> Callable:
    """``fn`` to be compiled by TorchInductor on its first call, static shapes, after a reset of
    TorchDynamo (so what it records is this callable's own); compiled code comes from Inductor's
    caches where the graph was compiled before."""
    import torch

    use_cache_dir()
    torch._dynamo.reset()
    return torch.compile(fn, backend="inductor", options=dict(options) if options else None, dynamic=False)


def triton_missing() -> str | None:
    """Why TorchInductor cannot compile for a GPU here (it generates triton kernels), or None."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return "TorchInductor on cuda generates triton kernels, and triton is not installed"
    return None


@dataclass(frozen=True)
class InductorRunner:
    """A mode that compiles each case with TorchInductor.

    ``options``: ``torch.compile`` Inductor options; None reads ``MLUVERIFY_INDUCTOR_OPTIONS``.
    """

    options: Mapping[str, Any] | None = None

    def __call__(self, fn: Callable, args: tuple, kwargs: dict, case: Case) -> Execution:
        import torch
        import torch._inductor
        from torch._dynamo.exc import TorchDynamoException

        options = dict(self.options) if self.options is not None else options_from_env()
        check_options(options, torch._inductor.list_options(),
                      where=f"case {case.case_id}" + ("" if self.options is not None else f" ({OPTIONS_ENV})"))
        compiled = compile_fresh(fn, options)
        with CompileWatch() as watch, torch.no_grad():
            try:
                output = compiled(*args, **kwargs)
            except TorchDynamoException as exc:
                raise BackendError(f"case {case.case_id}: TorchInductor failed to compile it: "
                                   f"{compiler_message(exc)}") from exc
        return watch.execution(output)


@hookimpl(trylast=True)  # after the plugin that adds the "cuda" back end
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(TorchDeviceBackend("cpu", "cpu", runners={"inductor": (POLICY, InductorRunner())},
                                    compiling_modes=("inductor",),
                                    requirement=cpp_compiler_missing))
    cuda = registry.get("cuda") if "cuda" in registry else None
    if isinstance(cuda, TorchDeviceBackend):
        cuda.add_mode("inductor", POLICY, with_fp32_precision("ieee", InductorRunner()), requirement=triton_missing,
                      compiles=True)
