"""How ATen ops reach the emulated MLU: ``torch.library`` impls for PrivateUse1.

Three kinds of impls, all registered once at import:

* memory plumbing (allocation, copies between devices, views, ``resize_``, ``set_``, ``item``):
  part of the device itself, never counted as fallbacks (``_plumbing``);
* one impl per op name that has a kernel in the ``KernelRegistry``: it unwraps ``mlu`` tensors
  into CPU aliases, calls the kernel of the active mode (falling back to ``cnnl``), and wraps
  the result (see ``OpRunner``);
* the boxed fallback for every other op: the same unwrapping, the CPU ATen kernel, counted and
  logged in ``mluverify.device._fallback`` (or, under the ``seed`` rule, an error naming the op).

Either way an op runs now, on the calling thread, or — inside ``with Queue(i):`` — is queued on
that queue (``_queued``); which kernel runs and whether it is a fallback is decided when the op
is issued.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from mluverify.device import _fallback, _hazards, _queued, queues
from mluverify.device._numbers import wrapped_number
from mluverify.device._storage import (DEVICE_TYPE, alias, buffer_of, current_card, device_view, empty_device,
                                       wrap_cpu)

_libraries: dict[str, torch.library.Library] = {}
_lib_fallback = torch.library.Library("_", "IMPL")
_CPU = torch.device("cpu")


# native_batch_norm updates these in place although its schema does not mark them as written.
UNANNOTATED_WRITES = frozenset({"running_mean", "running_var"})


class MixedDeviceError(RuntimeError):
    """Tensors on two devices (``mlu:i`` and ``cpu`` or ``mlu:j``) met in one op (as on a real
    device, a RuntimeError)."""


def _mixed(op_name: str, first: torch.device, other: torch.device) -> MixedDeviceError:
    return MixedDeviceError(
        f"Expected all tensors to be on the same device, but found at least two devices, "
        f"{first} and {other}! (when checking arguments for {op_name})"
    )


class Call:
    """One call of an op on the device: CPU aliases of its arguments, its card, the device
    buffers it touches, and whether any tensor is complex."""

    __slots__ = ("args", "kwargs", "card", "buffers", "complex_seen")

    def __init__(self) -> None:
        self.args: tuple = ()
        self.kwargs: dict = {}
        self.card: int | None = None
        self.buffers: list = []
        self.complex_seen = False


class OpRunner:
    """Runs one ATen overload on CPU aliases of its ``mlu`` arguments and wraps the results.

    Built once per overload from its schema: which arguments the op writes (their storage
    generation is bumped) and which returns alias an argument (in-place / out= returns give back
    the ``mlu`` argument itself; view returns become ``mlu`` views of the argument's storage).
    ``queueable``: whether the op may run on a queue's worker (fresh or in-place tensor returns,
    no ``out=`` arguments, not a random op, which must draw from the generator in program order).
    """

    __slots__ = ("op", "name", "_writes", "_out_names", "_return_alias", "_return_is_view",
                 "_tensor_positions", "queueable")

    def __init__(self, op: torch._ops.OpOverload) -> None:
        schema = op._schema
        self.op = op
        self.name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        sets = {}
        writes = []
        for index, arg in enumerate(schema.arguments):
            info = arg.alias_info
            if info is None:
                continue
            for alias_set in info.before_set:
                sets.setdefault(alias_set, (index, arg.name, arg.kwarg_only))
            if info.is_write:
                writes.append((index, arg.name, arg.kwarg_only))
        writes += [(i, a.name, a.kwarg_only) for i, a in enumerate(schema.arguments)
                   if a.name in UNANNOTATED_WRITES and a.alias_info is None]
        self._writes = tuple(writes)
        # out= arguments: the CPU op may resize them, which must not reallocate a device
        # buffer in place; they get a fresh CPU tensor whose result is stored afterwards.
        self._out_names = frozenset(name for _, name, kwarg_only in writes if kwarg_only)
        aliases, views = [], []
        for ret in schema.returns:
            info = ret.alias_info
            target = sets.get(next(iter(info.before_set))) if info is not None and info.before_set else None
            aliases.append(target)
            views.append(target is not None and not info.is_write)
        self._return_alias = tuple(aliases)
        self._return_is_view = tuple(views)
        self._tensor_positions = frozenset(
            i for i, a in enumerate(schema.arguments) if isinstance(a.type, torch.TensorType))
        self.queueable = (not self._out_names and not any(views)
                          and all(isinstance(r.type, torch.TensorType) for r in schema.returns)
                          and torch.Tag.nondeterministic_seeded not in op.tags)

    # -- arguments -------------------------------------------------------------------------
    def unwrap(self, args: tuple, kwargs: dict) -> Call:
        """CPU aliases for ``mlu`` tensors (checking they share one card), wrapped-number tensors
        for Python numbers where the schema wants a tensor."""
        call = Call()
        cpu_args = []
        for position, value in enumerate(args):
            if position in self._tensor_positions and isinstance(value, (bool, int, float, complex)):
                # The dispatcher hands Python a wrapped-number tensor (``x % 8``) as a plain
                # number; the CPU op's schema wants a tensor back, promoted as a number.
                value = wrapped_number(value)
            cpu_args.append(self._unwrap_value(value, call))
        cpu_kwargs = {}
        for key, value in kwargs.items():
            if key in self._out_names and isinstance(value, torch.Tensor):
                self._unwrap_value(value, call)
                cpu_kwargs[key] = torch.empty(0, dtype=value.dtype)
                continue
            cpu_kwargs[key] = self._unwrap_value(value, call)
        call.args, call.kwargs = tuple(cpu_args), cpu_kwargs
        if call.card is None:
            call.card = current_card()
        return call

    def _unwrap_value(self, value: Any, call: Call) -> Any:
        if isinstance(value, torch.Tensor):
            call.complex_seen |= value.dtype.is_complex
            device = value.device
            if device.type == DEVICE_TYPE:
                if call.card is None:
                    call.card = device.index
                elif device.index != call.card:
                    raise _mixed(self.name, torch.device(DEVICE_TYPE, call.card), device)
                buffer = buffer_of(value)
                call.buffers.append(buffer)
                return alias(value, buffer)
            if device.type == "cpu" and value.dim() != 0:
                raise _mixed(self.name, torch.device(DEVICE_TYPE, call.card or 0), device)
            return value
        if isinstance(value, (list, tuple)) and value and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(self._unwrap_value(v, call) for v in value)
        if isinstance(value, torch.device) and value.type == DEVICE_TYPE:
            if call.card is None and value.index is not None:
                call.card = value.index
            return _CPU
        return value

    def _argument(self, target: tuple, args: tuple, kwargs: dict) -> Any:
        index, name, kwarg_only = target
        return kwargs.get(name) if kwarg_only or index >= len(args) else args[index]

    def _written_tensors(self, args: tuple, kwargs: dict, with_out: bool = True) -> list[torch.Tensor]:
        """The tensors the op writes in place (``out=`` arguments only ``with_out``)."""
        written = []
        for target in self._writes:
            if with_out or target[1] not in self._out_names:
                value = self._argument(target, args, kwargs)
                written += [t for t in (value if isinstance(value, (list, tuple)) else (value,))
                            if isinstance(t, torch.Tensor)]
        return written

    def written_buffers(self, args: tuple, kwargs: dict) -> list:
        """The device buffers the op writes in place (not its fresh results)."""
        return [buffer_of(t) for t in self._written_tensors(args, kwargs) if t.device.type == DEVICE_TYPE]

    # -- running -----------------------------------------------------------------------------
    def execute(self, kernel: Callable | None, args: tuple, kwargs: dict, why_cpu: str) -> Any:
        """Run (or queue) the op with ``kernel``, or on the CPU when there is none (``why_cpu``)."""
        call = self.unwrap(args, kwargs)
        if kernel is not None and call.complex_seen:
            kernel, why_cpu = None, "complex dtype"
        if kernel is None:
            _fallback.record(self.name, why_cpu)
        compute = functools.partial(self.compute, kernel, call)
        queue = queues.queue_in_effect(call.card) if self.queueable else None
        planned = None if queue is None else _queued.plan(self.op, self._tensor_positions, args, kwargs)
        if planned is not None:
            return self._submit(planned, queue, compute, call, args, kwargs)
        if _hazards.any_pending():
            _hazards.settle_read(call.buffers)
            _hazards.settle_write(self.written_buffers(args, kwargs))
        return self.wrap(compute(), args, kwargs, call)

    def _submit(self, planned: tuple[_queued.Geometry, ...], queue: queues.Queue, compute: Callable[[], Any],
                call: Call, args: tuple, kwargs: dict) -> Any:
        """Queue the op on ``queue``: its outputs now (``planned``), its computation on the worker."""
        outputs, fresh = [], []
        for position, (size, stride, dtype) in enumerate(planned):
            target = self._return_alias[position]
            if target is None:
                output = empty_device(size, dtype, stride, call.card)
                # The geometry is taken now: the caller may change the output's in place (stft
                # squeezes and transposes its result) before the worker fills it.
                fresh.append((position, output, alias(output)))
            else:
                output = self._argument(target, args, kwargs)
            outputs.append(output)
        written = self.written_buffers(args, kwargs)

        def run() -> None:
            result = compute()
            results = (result,) if isinstance(result, torch.Tensor) else tuple(result or ())
            for position, _, host in fresh:
                _queued.fill(self.name, host, results[position])
            for buffer in written:
                buffer.generation += 1

        queue.submit(self.name, run, call.buffers, written + [buffer_of(o) for _, o, _ in fresh])
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def compute(self, kernel: Callable | None, call: Call) -> Any:
        """The CPU-side result; under the ``seed`` rule a failing kernel falls back to the CPU op
        (on the arguments as they were before the kernel ran), recorded with the reason."""
        if kernel is None:
            return self.op(*call.args, **call.kwargs)
        if _fallback.active_rule() != _fallback.SEED:
            return kernel(*call.args, **call.kwargs)
        written = self._written_tensors(call.args, call.kwargs, with_out=False)
        saved = [t.clone() for t in written]
        try:
            return kernel(*call.args, **call.kwargs)
        except Exception as exc:  # noqa: BLE001 - the seed rule: any kernel failure runs on the CPU
            for target, before in zip(written, saved):
                target.copy_(before)
            _fallback.record(self.name, f"kernel failed: {type(exc).__name__}: {exc}")
            return self.op(*call.args, **call.kwargs)

    # -- results -----------------------------------------------------------------------------
    def wrap(self, result: Any, args: tuple, kwargs: dict, call: Call) -> Any:
        """Turn the CPU result into ``mlu`` results, honouring the schema's aliasing."""
        for name in self._out_names:
            if isinstance(kwargs.get(name), torch.Tensor):
                _store_out(kwargs[name], call.kwargs[name])
        self.mark_written(args, kwargs)
        if len(self._return_alias) == 1:
            return self._wrap_one(result, 0, args, kwargs, call.card)
        if not self._return_alias:
            return None
        return tuple(self._wrap_one(r, i, args, kwargs, call.card) for i, r in enumerate(result))

    def mark_written(self, args: tuple, kwargs: dict) -> None:
        for buffer in self.written_buffers(args, kwargs):
            buffer.generation += 1

    def _wrap_one(self, result: Any, position: int, args: tuple, kwargs: dict, card: int) -> Any:
        target = self._return_alias[position]
        if target is not None:
            base = self._argument(target, args, kwargs)
            if not self._return_is_view[position]:
                return base
            return _view_like(base, result, card)
        return _wrap_fresh(result, card)


def _store_out(device_out: torch.Tensor, cpu_out: torch.Tensor) -> None:
    """Give an ``out=`` device tensor the CPU result's shape (as CPU ``out=`` does) and values."""
    from mluverify.device._storage import resize_device

    if device_out.shape != cpu_out.shape:
        resize_device(device_out, cpu_out.shape)
    alias(device_out).copy_(cpu_out)


def _view_like(base: Any, result: Any, card: int) -> Any:
    """``mlu`` views of ``base`` with the geometry of the CPU view(s) ``result``."""
    if isinstance(result, torch.Tensor):
        if isinstance(base, (list, tuple)):
            return _wrap_fresh(result.clone(), card)
        return device_view(base, result.size(), result.stride(), result.storage_offset())
    return [_view_like(base, r, card) for r in result]


def _wrap_fresh(result: Any, card: int) -> Any:
    """Adopt freshly computed CPU tensors (in lists and tuples too) as ``mlu`` tensors on ``card``."""
    if isinstance(result, torch.Tensor):
        return wrap_cpu(result, card)
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap_fresh(r, card) for r in result)
    return result


_RUNNERS: dict[torch._ops.OpOverload, OpRunner] = {}


def runner_for(op: torch._ops.OpOverload) -> OpRunner:
    runner = _RUNNERS.get(op)
    if runner is None:
        runner = _RUNNERS[op] = OpRunner(op)
    return runner


def _fallback_kernel(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    runner = runner_for(op)
    if _fallback.active_rule() == _fallback.SEED:
        raise _fallback.not_declared(runner.name)
    return runner.execute(None, args, kwargs, "no MLU kernel")


def make_kernel_impl(op: torch._ops.OpOverload, select: Callable[[], Callable | None]) -> Callable:
    """The PrivateUse1 impl of ``op``: the selected registry kernel, else the counted fallback.

    ``select()`` returns the kernel for the active mode (or None when no kernel covers it).
    Complex inputs always go to the CPU fallback: no MLU kernel computes complex numbers.
    """
    runner = runner_for(op)

    def impl(*args: Any, **kwargs: Any) -> Any:
        return runner.execute(select(), args, kwargs, "no MLU kernel for this mode")

    return impl


def register_op_impl(op_name: str, impl: Callable) -> None:
    """Register ``impl`` as the PrivateUse1 kernel of ``op_name`` (``"ns::op.overload"``,
    ``aten`` when no namespace is given)."""
    namespace, _, name = op_name.rpartition("::")
    namespace = namespace or "aten"
    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch.library.Library(namespace, "IMPL")
    library.impl(name, impl, "PrivateUse1")


def install_fallback() -> None:
    _lib_fallback.fallback(_fallback_kernel, dispatch_key="PrivateUse1")
