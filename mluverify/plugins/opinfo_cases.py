"""Built-in plugin: cases from PyTorch's OpInfo database (``op_db``) for the ops a device claims.

``mluverify_case_sources`` returns one source, ``opinfo``: ``cases(ops)`` yields an
``OpInfoCase`` per float32 CPU sample input of every OpInfo entry that reaches one of ``ops``
(ATen names such as ``"aten::add.Tensor"`` or plain names such as ``"permute"``), and for the
entries that support float16 on the CPU a float16 case for some of those samples (their
floating tensors rounded to values float16 holds, so the float32 CPU reference sees the very
inputs the device computes with). An entry reaches an op when its name, its ATen name, or the
op it decomposes into (``COMPOSITES``) is that op. Samples are generated with torch's generator
seeded per entry, so every process (pytest-xdist workers included) gets the same cases in the
same order.

``torch.testing._internal`` is private and changes between torch releases; it is imported only
inside ``cases()`` so loading this plugin stays cheap. Nothing is pinned here: an entry whose
samples cannot be generated on this torch is reported by ``OpInfoSource.skipped``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from mluverify.core.hookspecs import hookimpl

# OpInfo name (last dotted part) -> the device op it reaches on the device, when the names differ.
COMPOSITES: dict[str, str] = {
    "conv1d": "convolution_overrideable", "conv2d": "convolution_overrideable",
    "conv3d": "convolution_overrideable", "conv_transpose1d": "convolution_overrideable",
    "conv_transpose2d": "convolution_overrideable", "conv_transpose3d": "convolution_overrideable",
    "linear": "addmm", "matmul": "mm", "layer_norm": "native_layer_norm",
    "group_norm": "native_group_norm", "batch_norm": "native_batch_norm",
    "max_pool2d": "max_pool2d_with_indices", "max_pool3d": "max_pool3d_with_indices",
    "adaptive_avg_pool2d": "adaptive_avg_pool2d", "adaptive_avg_pool3d": "adaptive_avg_pool3d",
    "embedding": "index_select", "relu6": "hardtanh",
    "upsample_nearest": "upsample_nearest2d", "upsample_bilinear": "upsample_bilinear2d",
    "interpolate.nearest": "upsample_nearest2d", "interpolate.linear": "upsample_linear1d",
    "interpolate.bilinear": "upsample_bilinear2d", "interpolate.trilinear": "upsample_trilinear3d",
    "true_divide": "div",
}
# Only torch-level entries: the ``masked.``, ``sparse.``, ``linalg.``, ... namespaces reach
# other ops (masked reductions, sparse kernels) that happen to share a last name.
NAMESPACES = ("", "nn.functional.")

# Entries whose outputs are random or depend on more than the inputs: never comparable.
NONDETERMINISTIC = ("dropout", "normal", "bernoulli", "rand", "multinomial", "empty", "uniform")


def _op_db() -> list:
    """``op_db``, imported without letting torch's test utilities switch the hypothesis profile
    (``common_utils`` loads its own "dev" / "pytorch_ci" profile on import)."""
    from hypothesis import settings

    profile = settings.get_current_profile_name()
    from torch.testing._internal.common_methods_invocations import op_db

    settings.load_profile(profile)
    return op_db


def base_name(op: str) -> str:
    """``"aten::add_.Tensor"`` -> ``"add"``; ``"aten::_softmax"`` -> ``"softmax"``; ``"permute"`` stays."""
    name = op.split("::")[-1].split(".")[0]
    return name.strip("_")


@dataclass(frozen=True)
class OpInfoCase:
    """One OpInfo sample: call ``fn(input, *args, **kwargs)``; ``op`` is the OpInfo entry name
    (with its variant), ``index`` the sample's position among the entry's samples, ``dtype`` the
    precision the device computes it in (the CPU reference is float32)."""

    op: str
    index: int
    fn: Callable = field(repr=False)
    input: Any = field(repr=False)
    args: tuple = field(repr=False)
    kwargs: dict = field(repr=False)
    reaches: str = ""
    dtype: str = "float32"

    @property
    def case_name(self) -> str:
        """``<entry>-<index>``, with ``-float16`` for a float16 case."""
        return f"{self.op}-{self.index}" + ("" if self.dtype == "float32" else f"-{self.dtype}")


@dataclass
class OpInfoSource:
    """The ``opinfo`` case source: float32 CPU samples of the OpInfo entries reaching ``ops``."""

    name: str = "opinfo"
    seed: int = 0
    max_samples: int = 24  # per entry, evenly spaced (max_pool2d alone has 1440)
    max_half_samples: int = 8  # float16 cases per entry, evenly spaced among those
    skipped: dict[str, str] = field(default_factory=dict)

    def entries(self, ops: Iterable[str]) -> list:
        """The OpInfo entries (``op_db``) supporting float32 on the CPU that reach one of ``ops``."""
        import torch

        claimed = {base_name(op) for op in ops}
        return [info for info in _op_db()
                if _in_namespaces(info.name) and _reaches(info, claimed) and not _nondeterministic(info.name)
                and torch.float32 in info.supported_dtypes("cpu")]

    def cases(self, ops: Iterable[str]) -> Iterator[OpInfoCase]:
        """Every float32 CPU sample of every entry reaching ``ops``, in ``op_db`` order."""
        import torch

        claimed = {base_name(op) for op in ops}
        for info in self.entries(claimed):
            full_name = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
            torch.manual_seed(self.seed)
            try:
                samples = list(opinfo_samples(info, torch.float32))
            except Exception as exc:  # a private API: report the entry, keep the others
                self.skipped[full_name] = f"{type(exc).__name__}: {exc}"
                continue
            reaches = _reached(info, claimed)
            chosen = _evenly(list(enumerate(samples)), self.max_samples)
            for index, sample in chosen:
                yield OpInfoCase(full_name, index, info.op, sample.input, tuple(sample.args),
                                 dict(sample.kwargs), reaches)
            if torch.float16 not in info.supported_dtypes("cpu"):
                continue
            # A sample asking for an output dtype (``dtype=``) computes in that dtype, not float16.
            unpinned = [(index, sample) for index, sample in chosen if "dtype" not in sample.kwargs]
            for index, sample in _evenly(unpinned, self.max_half_samples):
                half = sample.transform(_on_half_grid)
                yield OpInfoCase(full_name, index, info.op, half.input, tuple(half.args), dict(half.kwargs),
                                 reaches, dtype="float16")


def opinfo_samples(info: Any, dtype: Any, requires_grad: bool = False) -> Iterator[Any]:
    """``info.sample_inputs("cpu", dtype, requires_grad)``: the same samples in the same order.

    ``sample_inputs`` wraps its samples in torch's ``TrackedInputIter``, which walks the whole
    call stack (``inspect.stack``) twice per call to find a ``unittest`` test to attach them to;
    under pytest there is none, and the walks made up most of collecting the OpInfo suites. This
    seeds as that iterator does when it finds no test (``set_rng_seed(SEED)`` before each
    sample), so the values are the ones ``sample_inputs`` gives.
    """
    from torch.testing._internal.common_utils import SEED

    samples = iter(info.sample_inputs_func(info, "cpu", dtype, requires_grad))
    while True:
        _seed_cpu_generators(SEED)
        try:
            yield next(samples)
        except StopIteration:
            return


def _seed_cpu_generators(seed: int) -> None:
    """``set_rng_seed(seed)`` for the generators CPU samples draw from: torch's CPU generator,
    ``random`` and numpy. ``torch.manual_seed`` seeds every accelerator's generator as well, and
    while CUDA is not initialized each seeding queues a lazy call with its formatted call stack
    (``torch.cuda._lazy_call``): once per sample, that was half of collecting the default suites."""
    import random

    import numpy
    import torch

    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


def _evenly(items: list, most: int) -> list:
    """At most ``most`` of ``items``, evenly spaced, the first included."""
    return items[::-(-len(items) // most)] if items else items


def _on_half_grid(value: Any) -> Any:
    """A floating tensor rounded to the values float16 holds (finite values beyond its range
    clipped to its largest), kept in its dtype; anything else unchanged."""
    import torch

    if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
        return value
    limit = torch.finfo(torch.float16).max
    return torch.where(torch.isfinite(value), value.clamp(-limit, limit), value).to(torch.float16).to(value.dtype)


def _in_namespaces(name: str) -> bool:
    return name.rpartition(".")[0] + ("." if "." in name else "") in NAMESPACES


def _names(info) -> set[str]:
    last = info.name.split(".")[-1]
    if last == "interpolate":  # which op it reaches depends on the mode (the variant)
        composite = COMPOSITES.get(f"{last}.{info.variant_test_name}")
        return {base_name(composite)} if composite else set()
    names = {base_name(last), base_name(info.aten_name or "")}
    return names | {base_name(COMPOSITES[n]) for n in list(names) if n in COMPOSITES}


def _reaches(info, claimed: set[str]) -> bool:
    return bool(_names(info) & claimed)


def _reached(info, claimed: set[str]) -> str:
    return ",".join(sorted(_names(info) & claimed))


def _nondeterministic(name: str) -> bool:
    return any(word in name for word in NONDETERMINISTIC)


@hookimpl
def mluverify_case_sources() -> Iterable[OpInfoSource]:
    return [OpInfoSource()]
