"""``Dumper``: every op run inside the block, dumped in Cambricon's layout and indexed.

Two modes cooperate: a ``TorchFunctionMode`` (outside) sees torch-level calls (``conv2d``)
and makes them the parents of the aten ops that a ``TorchDispatchMode`` (inside) sees and
dumps. Dispatch modes work for tensors of any device, so the Dumper does too. Index-layout
dumps at levels 0 and 1 hand each op's dumping to the C++ index core (``_core.cpp``).
"""
from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from mluverify.dump._cpu import ReferenceChain, error_metrics, error_rel_mse, rerun_on_cpu
from mluverify.dump._format import (
    Node, NumbersNode, OptionalNode, OtherNode, ScalarNode, SequenceNode, render,
)
from mluverify.dump._fused import kernel_available, native
from mluverify.dump._host_memory import privateuse1_host_memory
from mluverify.dump._index import IndexJournal, meta_file
from mluverify.dump._layout import (
    OpInfo, OpTree, bind_arguments, call_name, create_dump_dir, op_info, resolve_dump_dir,
)
from mluverify.dump._summary import (
    SHARED_CACHE, SummaryCache, TensorSummary, shared_summaries, summarize, type_name,
)
from mluverify.dump._writer import DumpWriter
from mluverify.errors import InvalidArgument, valid_choice

LAYOUTS = ("cambricon", "index")


@dataclass(frozen=True)
class DumpSettings:
    """How a Dumper dumps (the arguments of ``Dumper``, validated)."""

    dump_dir: str = "./dump"
    enable: bool = True
    use_cpu: bool = False
    level: int = 0
    layout: str = "cambricon"
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.level not in (0, 1, 2):
            raise valid_choice("dump level", self.level, ["0", "1", "2"])
        if self.layout not in LAYOUTS:
            raise valid_choice("dump layout", self.layout, LAYOUTS)
        budget = self.max_bytes
        if budget is not None and (not isinstance(budget, int) or budget < 0):
            raise InvalidArgument(f"max_bytes must be a non-negative int or None, got "
                                  f"{self.max_bytes!r} (type {type(self.max_bytes).__name__})")


@dataclass
class _Written:
    """Where a level-2 tensor went: its bytes in the sidecar and, once written, its text file
    (which later names of the same unchanged tensor hard-link to)."""

    file: str | None
    offset: int
    nbytes: int


@dataclass(slots=True)
class _Op:
    """One aten op being dumped."""

    info: OpInfo
    path: str  # relative to the dump root, "/"-separated
    header: tuple  # seq, op, name, path, parent: the index columns of all its rows
    # per tensor: arg, role, file, the summary's columns, degraded, offset, nbytes
    tensors: list[tuple] = field(default_factory=list)
    non_tensors: list[str] = field(default_factory=list)  # "name=value" of the other values
    references: tuple | None = None  # reference-chain (args, kwargs, inherited) with use_cpu

    def frame(self, errors: dict[str, Any] | None = None) -> tuple:
        """The op's journal frame: its columns, its tensors' columns, errors (see _index)."""
        return (*self.header, ", ".join(self.non_tensors)), self.tensors, errors


class Dumper:
    """Dump every op run inside a ``with`` block, like ``torch_mlu.core.dumptool.Dumper``.

    :param dump_dir: where to write; if it exists, ``dump_dir_1``, ``_2``, ... is used.
    :param enable: ``False`` makes the block a no-op that writes nothing.
    :param use_cpu: also re-run each op on CPU copies of its inputs (``cpu_result``) and
        record its own and inherited error (not for in-place / ``out=`` ops).
    :param level: 0 first 10 values, 1 sum of absolute values (and statistics), 2 all values.
    :param layout: ``"cambricon"`` (a directory per op, a text file per argument) or
        ``"index"`` (only the parquet index, and the sidecar at level 2).
    :param max_bytes: budget of bytes; past it, level 2 degrades to level 1.
    """

    def __init__(self, dump_dir: str | os.PathLike[str] = "./dump", enable: bool = True,
                 use_cpu: bool = False, level: int = 0, *, layout: str = "cambricon",
                 max_bytes: int | None = None) -> None:
        self.settings = DumpSettings(os.fspath(dump_dir), bool(enable), bool(use_cpu), level,
                                     layout, max_bytes)
        self.path: Path | None = None
        self._modes: contextlib.ExitStack | None = None

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in asdict(self.settings).items())
        return f"Dumper({fields})"

    def __enter__(self) -> "Dumper":
        if not self.settings.enable:
            return self
        if self.settings.level >= 1 or self.settings.layout == "index":
            kernel_available()  # a first build (seconds) happens here, not inside the ops
        self.path = resolve_dump_dir(self.settings.dump_dir)
        create_dump_dir(self.path, first_file=meta_file(asdict(self.settings)))
        self._session = _DumpSession(self.settings, self.path)
        self._modes = contextlib.ExitStack()
        self._modes.enter_context(_CallMode(self._session.tree))
        self._modes.enter_context(_OpMode(self._session))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._modes is None:
            return
        self._modes.close()
        self._modes = None
        self._session.close()


class _CallMode(TorchFunctionMode):
    """Makes each torch-level call the parent of the aten ops it runs."""

    def __init__(self, tree: OpTree) -> None:
        super().__init__()
        self._tree = tree

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self._tree.enter_call(call_name(func))
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self._tree.exit_call()


class _OpMode(TorchDispatchMode):
    """Dumps each aten op: inputs before it runs (in-place ops change them), then results."""

    def __init__(self, session: "_DumpSession") -> None:
        super().__init__()
        self._session = session

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self._session.run(func, args, kwargs or {})


def _modes_on() -> bool:
    """Whether any dispatch or function mode is on. Inside its handler the Dumper's own
    dispatch mode is off, and so is its function mode when the op runs inside a torch-level
    call: usually none is."""
    return torch._C._len_torch_dispatch_stack() > 0 or torch._C._is_torch_function_mode_enabled()


def _device_work_queued() -> bool:
    """Whether the emulated MLU has queued work, whose results the C++ core cannot wait for."""
    device = privateuse1_host_memory()
    return device is not None and device.work_queued()


def _index_core(settings: DumpSettings) -> Any | None:
    """The C++ per-op work of this dump (_core.cpp), or None where the Python does it all:
    levels 0 and 1 of the index layout without ``use_cpu``, when the extension is built."""
    if settings.layout != "index" or settings.level == 2 or settings.use_cpu:
        return None
    summaries = shared_summaries(settings.level)
    if summaries is None:
        return None
    # The emulated MLU is the PrivateUse1 back end, and its memory is the host's.
    return native().IndexCore(summaries, privateuse1_host_memory() is not None)


def undumped() -> contextlib.ExitStack:
    """Work unseen by any torch mode, the Dumper's included: its own statistics (ops too), a real
    runtime's work that is no torch op."""
    stack = contextlib.ExitStack()
    if torch._C._len_torch_dispatch_stack():
        stack.enter_context(_disable_current_modes())
    if torch._C._is_torch_function_mode_enabled():
        stack.enter_context(torch._C.DisableTorchFunction())
    return stack


class _DumpSession:
    """The state of one enabled Dumper block."""

    def __init__(self, settings: DumpSettings, root: Path) -> None:
        self.settings = settings
        self.tree = OpTree()
        self._files = settings.layout == "cambricon"
        self._writer = DumpWriter(root, settings.max_bytes)
        self._journal = IndexJournal(root)
        # Level-2 summaries name this dump's files; lower levels are shared across dumps, so
        # a model's unchanged weights are summarized once, not once per dumped forward.
        self._cache = SummaryCache() if settings.level == 2 else SHARED_CACHE
        self._chain = ReferenceChain() if settings.use_cpu else None
        self._core = _index_core(settings)
        self._seq = 0
        self._degraded = False
        self._stopped = False

    def run(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Run one aten op, dumping it unless excluded or dumping stopped."""
        if self._stopped:
            return func(*args, **kwargs)
        info = op_info(func)
        if info.excluded:
            return self._run_undumped(func, args, kwargs)
        if self._core is not None and not _modes_on() and not _device_work_queued():
            return self._run_in_core(func, info, args, kwargs)
        op = self._step(self._begin, info, args, kwargs)
        try:
            output = func(*args, **kwargs)
        except BaseException:
            if op is not None:  # the inputs of an op that raised are what explains it
                self._step(self._journal.append, op.frame())
            raise
        if op is not None:
            self._step(self._finish, op, func, args, kwargs, output)
        return output

    def _run_in_core(self, func: Callable, info: OpInfo, args: tuple, kwargs: dict) -> Any:
        """Run one op dumped by the C++ index core: the same frame as ``_begin``/``_finish``."""
        self._core.begin(info, args, kwargs)
        try:
            output = func(*args, **kwargs)
        except BaseException:
            self._core_frame(info, None, raised=True)  # its inputs explain it
            raise
        self._core_frame(info, output, raised=False)
        return output

    def _core_frame(self, info: OpInfo, output: Any, raised: bool) -> None:
        path, parent = self.tree.place_op(info.name)
        self._seq += 1
        try:
            self._core.finish(self._journal.fileno(), self._seq, path, parent, output, raised)
        except OSError as exc:
            self._stop(exc)

    def _run_undumped(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """An excluded op still moves data that the reference chain must follow."""
        if self._chain is None:
            return func(*args, **kwargs)
        with undumped():
            ref_args, ref_kwargs, _ = self._chain.inputs(args, kwargs)
        output = func(*args, **kwargs)
        with undumped():
            self._chain.run(func, ref_args, ref_kwargs, output)
        return output

    def _step(self, step: Callable, *args: Any) -> Any:
        """Run a dump step unseen by any mode; a failed write stops dumping, never the
        program. The usual case, no mode on, goes without a ``with``: this runs twice per op."""
        try:
            if not _modes_on():
                return step(*args)
            with undumped():
                return step(*args)
        except OSError as exc:
            self._stop(exc)
            return None

    def _stop(self, exc: OSError) -> None:
        """Stop dumping after a failed write; the program goes on."""
        self._stopped = True
        warnings.warn(f"mluverify Dumper: stopped dumping into {self._writer.root} after "
                      f"{self._seq - 1} complete ops: {exc}; the index covers what was "
                      f"written", RuntimeWarning, stacklevel=3)

    def _begin(self, info: OpInfo, args: tuple, kwargs: dict) -> _Op:
        self._cache.settle()
        path, parent = self.tree.place_op(info.name)
        self._seq += 1
        op = _Op(info, path, (self._seq, info.qualified, info.name, path, parent))
        if self._files:
            self._writer.mkdir(path)
        for parameter, value in bind_arguments(info, args, kwargs):
            self._dump_value(op, parameter.label, "input", value, parameter.optional,
                             parameter.fixed_size, parameter.tensors)
            if parameter.written and isinstance(value, torch.Tensor):
                self._cache.forget(value)  # its result, same tensor, is summarized afresh
        if self._chain is not None:
            op.references = self._chain.inputs(args, kwargs)
        return op

    def _finish(self, op: _Op, func: Callable, args: tuple, kwargs: dict, output: Any) -> None:
        """Dump the results and index the op (one journal write per op)."""
        inputs = len(op.tensors)
        if output is not None:
            self._dump_value(op, "cnnl_result", "result", output)
        errors = None
        if self._chain is not None and len(op.tensors) > inputs:
            errors = self._errors(op, func, args, kwargs, output)
        self._journal.append(op.frame(errors))

    def _errors(self, op: _Op, func: Callable, args: tuple, kwargs: dict,
                output: Any) -> dict[str, Any]:
        """Own error (vs the CPU re-run, dumped as cpu_result), inherited and total error."""
        ref_args, ref_kwargs, inherited = op.references
        reference = self._chain.run(func, ref_args, ref_kwargs, output)
        errors: dict[str, Any] = {"inherited_rel_mse": inherited}
        errors["total_rel_mse"] = (None if reference is None
                                   else error_rel_mse(output, reference))
        if op.info.writes_inputs or op.info.uninitialised:
            return errors
        cpu_output, failure = rerun_on_cpu(func, args, kwargs)
        errors["cpu_error"] = failure
        if cpu_output is not None:
            errors.update(error_metrics(output, cpu_output))
            self._dump_value(op, "cpu_result", "cpu_result", cpu_output)
        return errors

    def _dump_value(self, op: _Op, label: str, role: str, value: Any, optional: bool = False,
                    fixed_size: int | None = None, tensors: bool = True) -> None:
        """Index one argument or result and, with files, write its file. ``tensors=False``
        (from the schema) skips looking for tensors in a value that cannot hold any."""
        file = f"{op.path}/{label}" if self._files else None
        if isinstance(value, torch.Tensor):
            summary, written = self._index_tensor(op, label, role, file, value)
            if file is not None:
                node = summary.block if not optional else OptionalNode(summary.block)
                self._write_file(file, node, None if optional else written)
            return
        if tensors and isinstance(value, (tuple, list)) and any(
                isinstance(item, torch.Tensor) for item in value):
            node = self._sequence_node(op, label, role, file, value)
        else:
            node = self._other_node(op, label, file, value, fixed_size)
        if file is not None:
            self._write_file(file, node if not optional or value is None else OptionalNode(node),
                             None)

    def _write_file(self, relative: str, node: Node, written: "_Written | None") -> None:
        """Write a file, or link the identical file of the same unchanged level-2 tensor."""
        if written is not None and written.file is not None:
            self._writer.link(written.file, relative)
            return
        self._writer.write_text(relative, render(node))
        if written is not None:
            written.file = relative

    def _sequence_node(self, op: _Op, label: str, role: str, file: str | None,
                       value: tuple | list) -> Node | None:
        """Index the tensors of a list or tuple (``label[i]``) and the rest as other values."""
        items = []
        for index, item in enumerate(value):
            item_label = f"{label}[{index}]"
            if isinstance(item, torch.Tensor):
                summary, _ = self._index_tensor(op, item_label, role, file, item)
                items.append(summary.block if file is not None else None)
            else:
                items.append(self._other_node(op, item_label, file, item))
        return None if file is None else SequenceNode(
            "Tuple" if role != "input" else "TensorList", tuple(items))

    @staticmethod
    def _other_node(op: _Op, label: str, file: str | None, value: Any,
                    fixed_size: int | None = None) -> Node | None:
        """Add a non-tensor value to the op's text; its printed node when files are written."""
        op.non_tensors.append(f"{label}={value!r}")
        if file is None:
            return None
        return OptionalNode(None) if value is None else _plain_node(value, fixed_size)

    def _summarize(self, tensor: torch.Tensor) -> tuple[TensorSummary, "_Written | None"]:
        level = self.settings.level
        if tensor.numel() == 0:  # decided by its metadata alone: no cache entry
            return summarize(tensor, level), None
        if level == 2 and (self._degraded or not self._writer.fits(tensor.numel(),
                                                                    tensor.element_size())):
            self._degraded, level = True, 1
        cached = self._cache.get(tensor, level)
        if cached is not None:
            return cached
        summary = summarize(tensor, level)
        written = None
        if summary.exact is not None:
            written = _Written(None, *self._writer.append_exact(summary.exact))
        self._cache.remember(tensor, summary, written)
        return summary, written

    def _index_tensor(self, op: _Op, label: str, role: str, file: str | None,
                      tensor: torch.Tensor) -> tuple[TensorSummary, "_Written | None"]:
        """Add a tensor's index columns to the op; its summary and where it was written."""
        summary, written = self._summarize(tensor)
        op.tensors.append((label, role, file, *summary.fields,
                           summary.level < self.settings.level,
                           written.offset if written else None,
                           written.nbytes if written else None))
        return summary, written

    def close(self) -> None:
        """Finish the index (parquet); on a failed write the journal stays, and is loadable."""
        self._cache.settle()
        self._writer.close()
        try:
            self._journal.close(to_parquet=not self._stopped)
        except OSError as exc:
            warnings.warn(f"mluverify Dumper: could not write the parquet index ({exc}); "
                          f"the journal index.journal holds every row", RuntimeWarning)


_OTHER_KINDS = {torch.dtype: "ScalarType", torch.device: "Device", torch.layout: "Layout",
                torch.memory_format: "MemoryFormat", str: "String", torch.Generator: "Generator"}


def _plain_node(value: Any, fixed_size: int | None) -> Node:
    """The node of a non-tensor value (an unforeseen type prints its type name and repr)."""
    if isinstance(value, bool):
        return ScalarNode("Bool", value)
    if isinstance(value, int):
        return ScalarNode("Long", value)
    if isinstance(value, float):
        return ScalarNode("Double", value)
    if isinstance(value, (list, tuple)) and all(isinstance(i, (bool, int, float)) for i in value):
        return NumbersNode("Array" if fixed_size else "List", value)
    for python_type, kind in _OTHER_KINDS.items():
        if isinstance(value, python_type):
            text = type_name(value) if isinstance(value, torch.dtype) else str(value)
            return OtherNode(kind, text.removeprefix("torch."))
    return OtherNode(type(value).__name__, repr(value))
