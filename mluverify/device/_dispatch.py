"""How ATen ops reach the emulated MLU: ``torch.library`` impls for PrivateUse1.

Three kinds of impls, all registered once at import:

* memory plumbing (allocation, copies between devices, views, ``resize_``, ``set_``, ``item``):
  part of the device itself, never counted as fallbacks;
* one impl per op name that has a kernel in the ``KernelRegistry``: it unwraps ``mlu`` tensors
  into CPU aliases, calls the kernel of the active mode (falling back to ``cnnl``), and wraps
  the result (see ``OpRunner``);
* the boxed fallback for every other op: the same unwrapping, the CPU ATen kernel, counted and
  logged in ``mluverify.device._fallback``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from mluverify.device import _fallback, _storage
from mluverify.device._storage import DEVICE_TYPE, as_cpu, buffer_of, device_view, wrap_cpu

_libraries: dict[str, torch.library.Library] = {}
_lib_fallback = torch.library.Library("_", "IMPL")
_CPU = torch.device("cpu")


# native_batch_norm updates these in place although its schema does not mark them as written.
UNANNOTATED_WRITES = frozenset({"running_mean", "running_var"})


class MixedDeviceError(RuntimeError):
    """Tensors on ``mlu`` and ``cpu`` met in one op (as on a real device, a RuntimeError)."""


def _mixed(op_name: str, t: torch.Tensor) -> MixedDeviceError:
    return MixedDeviceError(
        f"Expected all tensors to be on the same device, but found at least two devices, "
        f"{_storage.DEVICE} and {t.device}! (when checking arguments for {op_name})"
    )


_WRAPPED_NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


class OpRunner:
    """Runs one ATen overload on CPU aliases of its ``mlu`` arguments and wraps the results.

    Built once per overload from its schema: which arguments the op writes (their storage
    generation is bumped) and which returns alias an argument (in-place / out= returns give back
    the ``mlu`` argument itself; view returns become ``mlu`` views of the argument's storage).
    """

    __slots__ = ("name", "_writes", "_out_names", "_return_alias", "_return_is_view", "_tensor_positions")

    def __init__(self, op: torch._ops.OpOverload) -> None:
        schema = op._schema
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

    def unwrap(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, bool]:
        """CPU aliases for ``mlu`` tensors; the flag says whether any tensor is complex."""
        complex_seen = False
        cpu_args = []
        for position, value in enumerate(args):
            if position in self._tensor_positions and isinstance(value, (bool, int, float, complex)):
                # The dispatcher hands Python a wrapped-number tensor (``x % 8``) as a plain
                # number; the CPU op's schema wants a tensor back.
                value = torch.scalar_tensor(value, dtype=_WRAPPED_NUMBER_DTYPES[type(value)])
            value, seen = self._unwrap_value(value)
            complex_seen |= seen
            cpu_args.append(value)
        cpu_kwargs = {}
        for key, value in kwargs.items():
            if key in self._out_names and isinstance(value, torch.Tensor):
                self._check_device(value)
                cpu_kwargs[key] = torch.empty(0, dtype=value.dtype)
                continue
            value, seen = self._unwrap_value(value)
            complex_seen |= seen
            cpu_kwargs[key] = value
        return tuple(cpu_args), cpu_kwargs, complex_seen

    def _check_device(self, value: torch.Tensor) -> None:
        if value.device.type != DEVICE_TYPE:
            raise _mixed(self.name, value)

    def _unwrap_value(self, value: Any) -> tuple[Any, bool]:
        if isinstance(value, torch.Tensor):
            device_type = value.device.type
            if device_type == DEVICE_TYPE:
                return as_cpu(value), value.dtype.is_complex
            if device_type == "cpu" and value.dim() != 0:
                raise _mixed(self.name, value)
            return value, value.dtype.is_complex
        if isinstance(value, (list, tuple)) and value and any(isinstance(v, torch.Tensor) for v in value):
            pairs = [self._unwrap_value(v) for v in value]
            return type(value)(v for v, _ in pairs), any(seen for _, seen in pairs)
        if isinstance(value, torch.device) and value.type == DEVICE_TYPE:
            return _CPU, False
        return value, False

    def wrap(self, result: Any, args: tuple, kwargs: dict, cpu_kwargs: dict) -> Any:
        """Turn the CPU result into ``mlu`` results, honouring the schema's aliasing."""
        for name in self._out_names:
            if isinstance(kwargs.get(name), torch.Tensor):
                _store_out(kwargs[name], cpu_kwargs[name])
        for index, name, kwarg_only in self._writes:
            written = kwargs.get(name) if kwarg_only or index >= len(args) else args[index]
            self._mark_written(written)
        if len(self._return_alias) == 1:
            return self._wrap_one(result, 0, args, kwargs)
        if not self._return_alias:
            return None
        return tuple(self._wrap_one(r, i, args, kwargs) for i, r in enumerate(result))

    def _wrap_one(self, result: Any, position: int, args: tuple, kwargs: dict) -> Any:
        target = self._return_alias[position]
        if target is not None:
            index, name, kwarg_only = target
            base = kwargs.get(name) if kwarg_only or index >= len(args) else args[index]
            if not self._return_is_view[position]:
                return base
            return _view_like(base, result)
        return _wrap_fresh(result)

    @staticmethod
    def _mark_written(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if value.device.type == DEVICE_TYPE:
                buffer_of(value).generation += 1
        elif isinstance(value, (list, tuple)):
            for v in value:
                OpRunner._mark_written(v)


def _store_out(device_out: torch.Tensor, cpu_out: torch.Tensor) -> None:
    """Give an ``out=`` device tensor the CPU result's shape (as CPU ``out=`` does) and values."""
    if device_out.shape != cpu_out.shape:
        _storage.resize_device(device_out, cpu_out.shape)
    as_cpu(device_out).copy_(cpu_out)


def _view_like(base: Any, result: Any) -> Any:
    """``mlu`` views of ``base`` with the geometry of the CPU view(s) ``result``."""
    if isinstance(result, torch.Tensor):
        if isinstance(base, (list, tuple)):
            return _wrap_fresh(result.clone())
        return device_view(base, result.size(), result.stride(), result.storage_offset())
    return [_view_like(base, r) for r in result]


def _wrap_fresh(result: Any) -> Any:
    """Adopt freshly computed CPU tensors (in lists and tuples too) as ``mlu`` tensors."""
    if isinstance(result, torch.Tensor):
        return wrap_cpu(result)
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap_fresh(r) for r in result)
    return result


_RUNNERS: dict[torch._ops.OpOverload, OpRunner] = {}


def runner_for(op: torch._ops.OpOverload) -> OpRunner:
    runner = _RUNNERS.get(op)
    if runner is None:
        runner = _RUNNERS[op] = OpRunner(op)
    return runner


def _fallback_kernel(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    runner = runner_for(op)
    cpu_args, cpu_kwargs, _ = runner.unwrap(args, kwargs)
    _fallback.record(runner.name, "no MLU kernel")
    return runner.wrap(op(*cpu_args, **cpu_kwargs), args, kwargs, cpu_kwargs)


def make_kernel_impl(op: torch._ops.OpOverload, select: Callable[[], Callable | None]) -> Callable:
    """The PrivateUse1 impl of ``op``: the selected registry kernel, else the counted fallback.

    ``select()`` returns the kernel for the active mode (or None when no kernel covers it).
    Complex inputs always go to the CPU fallback: no MLU kernel computes complex numbers.
    """
    runner = runner_for(op)

    def impl(*args: Any, **kwargs: Any) -> Any:
        cpu_args, cpu_kwargs, complex_seen = runner.unwrap(args, kwargs)
        kernel = select()
        if kernel is None or complex_seen:
            _fallback.record(runner.name, "complex dtype" if complex_seen else "no MLU kernel for this mode")
            kernel = op
        return runner.wrap(kernel(*cpu_args, **cpu_kwargs), args, kwargs, cpu_kwargs)

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
