"""What the conformance suite checks: the device's results have the CPU's metadata.

For an OpInfo sample, the op runs on CPU tensors and on their ``mlu`` copies (same storage
layout); every output must have the CPU output's type, dtype and shape, and an output that is
a view of an input on the CPU must be a view on the device with the same strides and storage
offset. Values against the CPU are not judged here (the ``opinfo`` and ``ops`` suites do that):
CPU fallbacks are allowed. A sample the CPU refuses is not a conformance question and is passed
over. The op also runs issued inside ``with Queue(0):``; its outputs and written inputs must be
the synchronous run's, bit for bit. For the binary (ufunc) entries, 0-dim tensors of several
dtypes also meet Python numbers, on either side: torch promotes a number differently from a tensor.

``python suites/conformance/conformance.py ENTRY [--all]`` checks one ``op_db`` entry in this
process and prints the findings as JSON: the suite runs entries that can kill their process
(a segfault inside torch) that way, in a subprocess.
"""
from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.utils._pytree as pytree

DEFAULT_SAMPLES = 2  # per entry in the default selection (the first ones); --mlu-heavy: every sample
# Arguments a sample must keep on the CPU, as torch's own samples for an accelerator do.
CPU_ARGUMENTS = {"tensor_split": {1}}  # tensor_indices_or_sections: "expected ... to be on cpu"
NUMBERS = (True, 3, 2.5, 1 + 1j)
NUMBER_DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)
# Entries whose outputs are uninitialised memory: two runs differ by nature.
NO_REPEATABLE_VALUES = ("empty",)


@dataclass(frozen=True)
class Finding:
    """One way the device's result differs from the CPU's: where and what."""

    entry: str
    sample: int
    what: str

    def __str__(self) -> str:
        return f"{self.entry} sample {self.sample}: {self.what}"


def entry_name(info: Any) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def op_db() -> list:
    """torch's OpInfo database (``torch.testing._internal``, private: pinned by the torch version)."""
    from mluverify.plugins.opinfo_cases import _op_db

    return _op_db()


def entry(name: str) -> Any:
    return next(info for info in op_db() if entry_name(info) == name)


def has_float32_samples(info: Any) -> bool:
    return torch.float32 in info.supported_dtypes("cpu")


def samples(info: Any, every: bool) -> Iterator[tuple[int, Any]]:
    """The entry's float32 CPU samples (seeded): all of them, or the first ``DEFAULT_SAMPLES``
    (generated lazily: some entries take seconds to make all of theirs)."""
    from mluverify.plugins.opinfo_cases import opinfo_samples

    torch.manual_seed(0)
    found = enumerate(opinfo_samples(info, torch.float32))
    yield from found if every else itertools.islice(found, DEFAULT_SAMPLES)


def _same_layout_on_device(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` on the device with its whole storage, so a view keeps its strides and offset."""
    if tensor.layout != torch.strided:
        return tensor.to("mlu")
    storage = torch.empty(0, dtype=torch.uint8).set_(tensor.untyped_storage()).to("mlu")
    return torch.empty(0, dtype=tensor.dtype, device="mlu").set_(
        storage.untyped_storage(), tensor.storage_offset(), tensor.size(), tensor.stride())


def _to_device(value: Any) -> Any:
    return pytree.tree_map(lambda v: _same_layout_on_device(v) if isinstance(v, torch.Tensor) else v, value)


def _storages(value: Any) -> set[int]:
    return {id(t.untyped_storage()) for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)}


def compare(expected: Any, got: Any, inputs: Any) -> list[str]:
    """How ``got`` (device) differs from ``expected`` (CPU) in type, dtype, shape, and for views
    of ``inputs`` in strides and offset; empty when it conforms."""
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    got_leaves, got_spec = pytree.tree_flatten(got)
    if expected_spec != got_spec:
        return [f"structure {got_spec} instead of {expected_spec}"]
    input_storages = {t.untyped_storage().data_ptr() for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)}
    differences = []
    for index, (want, have) in enumerate(zip(expected_leaves, got_leaves)):
        where = f"output {index}"
        if isinstance(want, torch.Tensor) != isinstance(have, torch.Tensor):
            differences.append(f"{where}: {type(have).__name__} instead of {type(want).__name__}")
        elif not isinstance(want, torch.Tensor):
            continue
        elif (want.dtype, want.shape) != (have.dtype, have.shape):
            differences.append(f"{where}: {have.dtype} {list(have.shape)} instead of {want.dtype} {list(want.shape)}")
        elif want.untyped_storage().data_ptr() in input_storages and \
                (want.stride(), want.storage_offset()) != (have.stride(), have.storage_offset()):
            differences.append(f"{where} (a view): strides {have.stride()} offset {have.storage_offset()} instead "
                               f"of {want.stride()} offset {want.storage_offset()}")
    return differences


def _differences(synchronous: Any, queued: Any) -> list[str]:
    """Where two device runs' results differ: structure, dtype, shape, values bit for bit (NaNs
    alike). Not strides: a queued op's fresh outputs take torch's meta strides, which differ from
    the CPU kernel's for a few ops (fft, eig) - views are checked against the CPU by ``compare``."""
    first, first_spec = pytree.tree_flatten(synchronous)
    second, second_spec = pytree.tree_flatten(queued)
    if first_spec != second_spec:
        return [f"structure {second_spec} instead of {first_spec}"]
    differences = []
    for index, (a, b) in enumerate(zip(first, second)):
        if not isinstance(a, torch.Tensor):
            if a != b and a == a:
                differences.append(f"value {index}: {b!r} instead of {a!r}")
            continue
        try:
            torch.testing.assert_close(b.cpu(), a.cpu(), rtol=0, atol=0, equal_nan=True)
        except AssertionError as error:
            differences.append(f"tensor {index}: {(str(error).splitlines() or [''])[0][:200]}")
    return differences


def _run(op: Any, call: tuple, kwargs: dict, queue: Any = None) -> Any:
    """``op`` on the device, seeded, synchronously or issued on ``queue`` (then synchronised)."""
    torch.manual_seed(1)
    if queue is None:
        return op(*call, **kwargs)
    with queue:
        result = op(*call, **kwargs)
    queue.synchronize()
    return result


def _check_call(name: str, index: int, op: Any, call: tuple, kwargs: dict, on_cpu: set[int]) -> list[Finding]:
    from mluverify.device import mlu_model

    copies = [(tuple(value if position in on_cpu else _to_device(value) for position, value in enumerate(call)),
               _to_device(kwargs)) for _ in range(2)]
    try:
        expected = op(*call, **kwargs)
    except Exception:  # noqa: BLE001 - the CPU refuses this call: nothing to conform to
        return []
    try:
        got = _run(op, *copies[0])
    except Exception as exc:  # noqa: BLE001 - the device must run what the CPU runs
        return [Finding(name, index, f"raises {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}")]
    findings = [Finding(name, index, d) for d in compare(expected, got, call)]
    try:
        queued = _run(op, *copies[1], mlu_model.Queue(0))
    except Exception as exc:  # noqa: BLE001 - what runs synchronously must run on a queue
        return findings + [Finding(name, index, f"on a Queue raises {type(exc).__name__}: {str(exc)[:300]}")]
    if not any(word in name for word in NO_REPEATABLE_VALUES):
        findings += [Finding(name, index, f"on a Queue: {d}") for d in _differences((got, copies[0]), (queued, copies[1]))]
    return findings


def check_entry(info: Any, every: bool) -> list[Finding]:
    """The findings of every checked sample of one ``op_db`` entry."""
    name = entry_name(info)
    on_cpu = CPU_ARGUMENTS.get(name, set())
    return [finding for index, sample in samples(info, every)
            for finding in _check_call(name, index, info.op, (sample.input, *sample.args), sample.kwargs, on_cpu)]


def check_number_operands(info: Any) -> list[Finding]:
    """0-dim tensors of ``NUMBER_DTYPES`` with each of ``NUMBERS``, on the right and on the left."""
    name = entry_name(info)
    findings = []
    for dtype, number in itertools.product(NUMBER_DTYPES, NUMBERS):
        tensor = torch.full((), 2, dtype=dtype)
        for side, call in (("right", (tensor, number)), ("left", (number, tensor))):
            for found in _check_call(name, 0, info.op, call, {}, set()):
                findings.append(Finding(name, 0, f"0-dim {dtype} with {number!r} on the {side}: {found.what}"))
    return findings


if __name__ == "__main__":
    import mluverify.device  # noqa: F401  (registers the device)

    found = check_entry(entry(sys.argv[1]), every="--all" in sys.argv)
    print(json.dumps([[f.sample, f.what] for f in found]))
