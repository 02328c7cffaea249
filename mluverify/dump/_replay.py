"""Captured cases back as calls: the op, its inputs (real or synthesised) and the precision.

``read_replay_cases(path)`` turns a cases file into ``ReplayCase`` objects; ``build()`` gives
what ``Pipeline.verify`` needs: a callable taking the case's tensors, the CPU tensors, and the
precision the device computes in. Tensors get the captured strides (a transposed weight stays
transposed). A case whose inputs were kept as a recipe gets values drawn from a generator
seeded by the case (the same values in every process): finite values from a normal law with
the captured mean and std (a draw outside [min, max] is drawn again uniformly in it), the
captured min and max placed once each, and NaN / +Inf / -Inf at their captured shares.
"""
from __future__ import annotations

import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mluverify.dump._cases import CasesMeta, cases_path, decode_value, read_cases
from mluverify.dump._index import SIDECAR
from mluverify.errors import RecordsError

# Ops whose results are not a function of their inputs: replaying them compares nothing.
_UNINITIALISED = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                  "empty_permuted", "resize_")
_RANDOM = ("bernoulli", "bernoulli_", "dropout", "native_dropout", "feature_dropout",
           "alpha_dropout", "rand", "rand_like", "randn", "randn_like", "randint",
           "randint_like", "randperm", "normal", "normal_", "uniform_", "exponential_",
           "geometric_", "log_normal_", "cauchy_", "random_", "multinomial", "rrelu_with_noise")
_REDUCED = ("float16", "bfloat16")


@dataclass(frozen=True)
class Replay:
    """One captured case ready to verify: ``fn(*args)`` runs the op on the tensors ``args``
    (CPU, float32 where the device computes in ``dtype`` float16 / bfloat16)."""

    fn: Callable[..., Any]
    args: tuple
    dtype: str


@dataclass(frozen=True)
class ReplayCase:
    """A unique case of a cases file (see ``mluverify.dump._cases`` for the columns)."""

    name: str
    model: str
    op: str  # aten::convolution
    count: int
    call_site: str
    backward: bool
    source: Path = field(repr=False)  # the cases directory
    call: str = field(repr=False, default="{}")
    tensors: tuple = field(repr=False, default=())
    arguments: str = field(repr=False, default="")

    @property
    def op_name(self) -> str:
        """The op as records name it: ``convolution``, ``add.Tensor`` (no ``aten::``)."""
        return self.op.removeprefix("aten::")

    @property
    def not_comparable(self) -> str | None:
        """Why replaying this case compares nothing, or None."""
        packet = self.op_name.split(".")[0]
        if packet in _UNINITIALISED:
            return f"{self.op} returns uninitialised memory"
        if packet in _RANDOM:
            return f"{self.op} returns random values"
        if not self.tensors:
            return f"{self.op} takes no tensor: nothing tells the target where to run it"
        return None

    def build(self) -> Replay:
        """The callable, CPU tensors and device precision; RecordsError says why not."""
        op = _resolve(self.op)
        try:
            call = json.loads(self.call)
        except ValueError as exc:
            raise RecordsError(f"{self.name}: corrupt call ({exc})") from None
        dtype = _device_dtype([spec["dtype"] for spec in self.tensors])
        tensors = tuple(self._tensor(index, spec, dtype != "float32")
                        for index, spec in enumerate(self.tensors))
        return Replay(_caller(op, call), tensors, dtype)

    def _tensor(self, index: int, spec: dict, widen: bool) -> Any:
        import torch

        dtype = getattr(torch, spec["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise RecordsError(f"{self.name}: tensor {spec['arg']} has unknown dtype "
                               f"{spec['dtype']!r}")
        if spec["source"] == "values":
            values = self._values(spec, dtype)
        elif spec["source"] == "recipe":
            values = synthesise(spec, dtype, _seed(f"{self.model}/{self.name}/{index}"))
        else:
            values = torch.empty(spec["shape"], dtype=dtype)
        tensor = restride(values, spec["shape"], spec["stride"])
        return tensor.float() if widen and tensor.is_floating_point() else tensor

    def _values(self, spec: dict, dtype: Any) -> Any:
        import torch

        stored = "float32" if spec["dtype"] == "bfloat16" else spec["dtype"]
        sidecar = self.source / SIDECAR
        try:
            with open(sidecar, "rb") as file:
                file.seek(spec["offset"])
                data = file.read(spec["nbytes"])
        except OSError as exc:
            raise RecordsError(f"{self.name}: cannot read {sidecar} ({exc.strerror or exc})") \
                from None
        count = math.prod(spec["shape"])
        if len(data) != count * np.dtype(stored).itemsize:
            raise RecordsError(f"{self.name}: {sidecar} holds {len(data)} bytes at offset "
                               f"{spec['offset']}, tensor {spec['arg']} needs "
                               f"{count * np.dtype(stored).itemsize}")
        array = np.frombuffer(data, dtype=stored).reshape(spec["shape"]).copy()
        return torch.from_numpy(array).to(dtype)


def read_replay_cases(path: str | os.PathLike[str]) -> tuple[CasesMeta, list[ReplayCase]]:
    """The cases of a cases file (directory or ``cases.parquet``), in capture order."""
    file = cases_path(path)
    meta, rows = read_cases(file)
    return meta, [ReplayCase(row["name"], row["model"], row["op"], row["count"],
                             row["call_site"], row["backward"], file.parent, row["call"],
                             tuple(row["tensors"]), row["arguments"]) for row in rows]


def _resolve(op: str) -> Any:
    """``aten::add.Tensor`` -> ``torch.ops.aten.add.Tensor`` (``default`` when no overload)."""
    import torch

    namespace, _, name = op.partition("::")
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    except (AttributeError, RuntimeError):
        raise RecordsError(f"op {op} does not exist in this torch ({torch.__version__})") \
            from None


def _caller(op: Any, call: dict) -> Callable[..., Any]:
    """``fn(*tensors)`` calling ``op`` with the captured arguments; devices in the arguments
    become the first tensor's (a replayed op runs where its inputs are)."""
    def fn(*tensors: Any) -> Any:
        device = tensors[0].device

        def tensor(index: int) -> Any:
            return tensors[index]

        args = decode_value(call["args"], tensor, device)
        kwargs = {name: decode_value(value, tensor, device)
                  for name, value in call["kwargs"].items()}
        return op(*args, **kwargs)

    fn.__name__ = str(op)
    decode_value(call["args"], lambda index: None, None)  # unsupported values fail here, early
    for value in call["kwargs"].values():
        decode_value(value, lambda index: None, None)
    return fn


def _device_dtype(dtypes: list[str]) -> str:
    """The device precision of a case: float16 / bfloat16 when every floating input has it
    (the CPU reference then runs in float32, as for any case), else float32."""
    floating = {d for d in dtypes if d.startswith(("float", "bfloat"))}
    return floating.pop() if len(floating) == 1 and floating <= set(_REDUCED) else "float32"


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def synthesise(spec: dict, dtype: Any, seed: int) -> Any:
    """Values matching a recipe, contiguous, in ``dtype`` (see the module docstring)."""
    import torch

    shape = list(spec["shape"])
    if dtype.is_complex:  # the recipe describes the real and imaginary parts
        real = synthesise({**spec, "shape": [*shape, 2]}, torch.float64, seed)
        return torch.view_as_complex(real).to(dtype)
    count = math.prod(shape)
    generator = torch.Generator().manual_seed(seed)
    low, high = spec["min"], spec["max"]
    # float64 only where float32 would round the recipe (wide integers, float64 tensors)
    work = torch.float64 if dtype.itemsize == 8 else torch.float32
    if math.isnan(low):  # nothing finite was captured
        values = torch.zeros(count, dtype=work)
    else:
        values = torch.randn(count, generator=generator, dtype=work)
        values = values * spec["std"] + spec["mean"]
        outside = (values < low) | (values > high)
        redraw = torch.rand(int(outside.sum()), generator=generator, dtype=work)
        values[outside] = low + redraw * (high - low)
        if count >= 2:  # the extremes once each, at two distinct places
            first = int(torch.randint(count, (1,), generator=generator))
            values[first], values[(first + 1) % count] = low, high
    if dtype == torch.bool:  # True at the captured share (the recipe's mean)
        values = torch.rand(count, generator=generator) < spec["mean"]
    elif not (dtype.is_floating_point or dtype.is_complex):
        values = values.round()
    _plant_non_finite(values, spec, generator)
    return values.to(dtype).reshape(shape)


def _plant_non_finite(values: Any, spec: dict, generator: Any) -> None:
    import torch

    count = values.numel()
    shares = [(spec.get(f"{kind}_share") or 0.0, value) for kind, value in
              (("nan", math.nan), ("posinf", math.inf), ("neginf", -math.inf))]
    wanted = [round(share * count) for share, _ in shares]
    if not any(wanted):
        return
    order = torch.randperm(count, generator=generator)
    start = 0
    for number, (_, value) in zip(wanted, shares):
        values[order[start:start + number]] = value
        start += number


def restride(values: Any, shape: list[int], stride: list[int]) -> Any:
    """``values`` (contiguous, logical order) as a tensor with ``stride``: a storage as
    large as the strides address, each logical element written where its strides put it
    (expanded, stride-0 dimensions included)."""
    import torch

    if list(values.stride()) == list(stride) or values.numel() == 0:
        return values
    size = 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    positions = torch.arange(size).as_strided(shape, stride).reshape(-1)
    storage = torch.zeros(size, dtype=values.dtype)
    storage[positions] = values.reshape(-1)
    return storage.as_strided(shape, stride)
