"""Capture a model as one functional ATen graph (``torch.export``), parameters as ``get_attr``.

``torch.jit`` modules (the seeds' ``torch.jit.trace`` flow) are converted with
``torch._export.converter.TS2EPConverter``; other modules are exported non-strictly. Device
parameters are captured through CPU views of their buffers, so capture never runs device
kernels and never copies weights.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import io
import logging
import operator
import warnings
from typing import Callable, Iterator

import torch
from torch import fx, nn

from mluverify.device.fusion.errors import CaptureError
from mluverify.device.fusion.exported import graph_module_of

TensorMap = Callable[[torch.Tensor], torch.Tensor]


def capture(model: nn.Module, example_inputs: tuple, as_cpu: TensorMap) -> fx.GraphModule:
    """The functional ATen graph of ``model`` for CPU ``example_inputs``.

    :param as_cpu: maps a (device) tensor to a CPU tensor aliasing its data.
    :raises CaptureError: when the model cannot be captured as one graph, with the reason.
    """
    return graph_module_of(capture_program(model, example_inputs, as_cpu, aten_dialect=False))


def capture_program(model: nn.Module, example_inputs: tuple, as_cpu: TensorMap, *,
                    aten_dialect: bool = True) -> torch.export.ExportedProgram:
    """``capture`` as torch.export's program (what an offline model serializes).

    :param aten_dialect: always retrace the exported program into the ATen dialect
        (``run_decompositions``). When False, a program the retrace would give back unchanged
        (``_retrace_gives_the_same_graph``) is returned as exported: the same graph, half the
        cost; the fused runtime needs the graph, an offline model the dialect.
    :raises CaptureError: as ``capture``.
    """
    try:
        with warnings.catch_warnings(), _quiet_export_log(), torch.no_grad():
            # The converter and export warn about their own deprecations and specializations,
            # which say nothing to the user of a fused model.
            warnings.simplefilter("ignore")
            exported, decompositions = _export(model, example_inputs, as_cpu), _decompositions()
            preservable = _preservable_ops(_registrations(), _collect_preservable_ops)
            reached = None if decompositions else _ops_reached(exported, preservable)
            if not aten_dialect and _retrace_gives_the_same_graph(exported, reached):
                exported.graph_module.graph.eliminate_dead_code()  # as the retrace drops an unused output
                exported.graph_module.recompile()
                return exported
            with _preservable_ops_limited(preservable if reached is None else preservable & reached):
                program = exported.run_decompositions(decompositions)
    except Exception as exc:  # any failure of capture means "run layer by layer"
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise CaptureError(f"cannot capture {model_name(model)}: {type(exc).__name__}: {first_line}") from exc
    return program


# Recurrent layers captured as one op each; decomposed into their cell ops when
# ``torch.backends.mlufusion`` (LSTM / GRU fusion) is off.
_RECURRENT_OPS = (
    torch.ops.aten.lstm.input, torch.ops.aten.lstm.data, torch.ops.aten.gru.input, torch.ops.aten.gru.data,
)


def _decompositions() -> dict:
    """The decompositions capture applies beyond functional ATen: the recurrent layers' when
    LSTM / GRU fusion is off (``torch.backends.mlufusion.set_flags(False)``), so that their cell
    ops, not one fused op, make up the program."""
    from torch._decomp import get_decompositions

    from mluverify.device.fusion.settings import lstm_fusion_enabled

    return {} if lstm_fusion_enabled() else get_decompositions(_RECURRENT_OPS)


def _collect_preservable_ops() -> set:
    from torch.export import exported_program

    return exported_program._collect_all_valid_cia_ops()  # private: torch is pinned (constraints.txt)


@contextlib.contextmanager
def _preservable_ops_limited(preserved: frozenset) -> Iterator[None]:
    """Let ``run_decompositions`` preserve only the CompositeImplicitAutograd (CIA) ops
    ``preserved``: those of the set of preservable ops (reused while the dispatcher's registrations
    are unchanged) that the exported graph can reach; the program is the one the whole set gives.

    ``run_decompositions`` overrides the CIA kernel of every preservable op (about 500, each for a
    dozen dispatch keys) on entry and restores them on exit, and recomputes the set first (torch
    caches only the ``aten`` namespace's part): three quarters of a small case's capture, paid by
    every ``mlu:cnml`` case. Its retrace dispatches only the ops of the exported graph, and only a
    CIA op that decomposes can reach others, so preserving the graph's own CIA ops gives the same
    program. Where the graph may reach further (a CIA op torch will not preserve, an in-place op
    functionalization replaces, a higher-order op, decompositions of our own), the whole set is
    kept. The set is computed again only when the registrations changed (a custom op registered,
    an op first touched). Not seen: a CIA kernel given in Python alone (``py_impl``) to an op
    already touched, as torch's own cache of the ``aten`` part does not see it either.
    """
    from torch.export import exported_program

    computed = exported_program._collect_all_valid_cia_ops
    exported_program._collect_all_valid_cia_ops = lambda: set(preserved)
    try:
        yield
    finally:
        exported_program._collect_all_valid_cia_ops = computed


def _ops_reached(exported: torch.export.ExportedProgram, preservable: frozenset) -> set | None:
    """The ops the graphs of ``exported`` call, or None where its retrace may dispatch others."""
    targets = {node.target for module in exported.graph_module.modules() if isinstance(module, fx.GraphModule)
               for node in module.graph.nodes if node.op == "call_function"}
    for target in targets:
        if isinstance(target, torch._ops.HigherOrderOperator):
            return None
        if isinstance(target, torch._ops.OpOverload) and target not in preservable and (
                target._schema.is_mutable or _has_cia_kernel(target)):
            return None
    return targets


def _retrace_gives_the_same_graph(exported: torch.export.ExportedProgram, reached: set | None) -> bool:
    """Whether ``run_decompositions({})`` would give back the graph of ``exported`` unchanged.

    It does where it only re-dispatches the graph's own ops and each comes back as itself: every
    op a functional ATen op (``_ops_reached`` found none that is in place, higher-order or a CIA
    op torch decomposes) or a preserved CIA op, on static sizes. A program with symbolic sizes
    (data-dependent ones, as a boolean mask's) is retraced: the retrace renames its runtime
    assertions' nodes.
    """
    if reached is None or exported.range_constraints:
        return False
    return all(isinstance(target, torch._ops.OpOverload) or target is operator.getitem for target in reached)


def _has_cia_kernel(op: torch._ops.OpOverload) -> bool:
    return (torch._C.DispatchKey.CompositeImplicitAutograd in op.py_kernels
            or torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"))


def _registrations() -> tuple:
    """What ``torch._export.utils._collect_all_valid_cia_ops`` reads: the C++ CIA registrations and
    how many ops each ``torch.ops`` namespace has materialized."""
    return (tuple(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")),
            tuple((name, len(getattr(torch.ops, name)._dir)) for name in torch.ops._dir))


@functools.lru_cache(maxsize=1)
def _preservable_ops(registrations: tuple, compute: Callable[[], set]) -> frozenset:
    """The preservable CIA ops for these registrations (the latest ones kept)."""
    return frozenset(compute())


def model_name(model: nn.Module) -> str:
    """How messages name ``model``: its ``display_name`` where a wrapper sets one, else its class."""
    return getattr(model, "display_name", None) or type(model).__name__


@contextlib.contextmanager
def _quiet_export_log() -> Iterator[None]:
    """Silence export's chatter: its specialization log, and the partial graph it prints to
    stderr when it fails (kept at DEBUG on ``mluverify.device.fusion``; the reason is recorded)."""
    logger = logging.getLogger("torch._export.non_strict_utils")
    previous = logger.level
    logger.setLevel(logging.ERROR)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            yield
    finally:
        logger.setLevel(previous)
        if printed.getvalue().strip():
            logging.getLogger("mluverify.device.fusion").debug("capture printed:\n%s", printed.getvalue())


def _export(model: nn.Module, example_inputs: tuple, as_cpu: TensorMap) -> torch.export.ExportedProgram:
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        return _convert_script(model, example_inputs, as_cpu)
    return torch.export.export(_cpu_shadow(model, as_cpu), example_inputs, strict=False)


def _convert_script(model: torch.jit.ScriptModule, example_inputs: tuple, as_cpu: TensorMap) -> torch.export.ExportedProgram:
    from torch._export import converter

    class CpuStateConverter(converter.TS2EPConverter):
        """``TS2EPConverter`` reading CPU views of the module's state.

        Its own ``__init__`` tells parameters from buffers by comparing every state tensor
        with every parameter, which would run device kernels on a module living on the device;
        this one tells them apart by name and changes nothing else.
        """

        def __init__(self) -> None:
            self.ts_model = model
            self.ts_graph, self.params, _, _ = converter._create_jit_graph(model, example_inputs)
            self.sample_args, self.sample_kwargs = example_inputs, None
            parameter_names = {name for name, _ in model.named_parameters()}
            state = model.state_dict()
            self.name_to_param = {k: v for k, v in state.items() if k in parameter_names}
            self.name_to_buffer = {k: v for k, v in state.items() if k not in parameter_names}
            self.name_to_non_tensor_attributes, self.name_to_constant = {}, {}
            self.lift_get_attr()  # adds the tensors the graph reads by attribute to the buffers
            for table in (self.name_to_param, self.name_to_buffer, self.name_to_constant):
                table.update({k: as_cpu(v) for k, v in table.items() if isinstance(v, torch.Tensor)})

    return CpuStateConverter().convert()


def _cpu_shadow(module: nn.Module, as_cpu: TensorMap) -> nn.Module:
    """A shallow copy of ``module`` whose parameters and buffers are CPU views; the original stays."""
    if all(t.device.type == "cpu" for t in _tensors(module)):
        return module
    shadow = copy.copy(module)
    shadow._parameters = {
        k: None if p is None else nn.Parameter(as_cpu(p.detach()), requires_grad=False)
        for k, p in module._parameters.items()
    }
    shadow._buffers = {k: None if b is None else as_cpu(b) for k, b in module._buffers.items()}
    shadow._modules = {k: None if m is None else _cpu_shadow(m, as_cpu) for k, m in module._modules.items()}
    return shadow


def _tensors(module: nn.Module):
    yield from module.parameters()
    yield from module.buffers()
