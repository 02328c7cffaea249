"""Which (op, dtype) the zoo's models run that the op suites never test: ``python -m
zoo.op_coverage [RUN ...]`` from ``suites/`` (RUN: run directories holding the op suites'
records, their pairs together; default ``reports/baseline``) writes ``suites/zoo/op_coverage.md``.

The models' side is the captured cases (``captured/cases.parquet``, ``capture_zoo``): each
case's ATen op and the dtype of its first tensor input. The suites' side is the op-level
suites' records (``OP_SUITES``): their ``op`` names and dtypes. Names are matched on the ATen
op's base name (overload, leading underscores, ``native_`` and an in-place ``_`` dropped)
against a record op's last dotted part (``nn.functional.layer_norm`` -> ``layer_norm``).
Every uncovered pair already has op cases: the captured cases, replayed on every target
whenever ``suites/zoo`` runs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OP_SUITES = ("ops", "opinfo", "seed_ops", "conformance")
# Ops that compute nothing to judge (views, copies, factories of constants) are listed apart.
LAYOUT = frozenset({"view", "unsafe_view", "reshape", "t", "transpose", "permute", "expand", "clone", "contiguous",
                    "split", "split_with_sizes", "select", "slice", "unsqueeze", "squeeze", "flatten", "alias",
                    "detach", "lift_fresh", "empty", "zeros", "ones", "full", "arange", "as_strided",
                    "unbind", "chunk", "view_as_real", "view_as_complex", "new_empty", "new_zeros", "new_ones"})


# ATen base names the op suites test under other names (their records' ``op``).
ALIASES = {"convolution": ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"),
           "to_copy": ("to",), "mm": ("matmul", "linear"), "bmm": ("matmul", "bmm"),
           "max_pool2d_with_indices": ("max_pool2d",)}


def base_name(op: str) -> str:
    """``aten::native_layer_norm.default`` -> ``layer_norm``; ``aten::add_.Tensor`` -> ``add``."""
    name = op.split("::")[-1].split(".")[0].lstrip("_")
    name = name.removeprefix("native_")
    return name[:-1] if name.endswith("_") else name


def model_pairs(cases_file: Path) -> dict[tuple[str, str], tuple[int, str]]:
    """``(base op, dtype) -> (cases, first call site)`` of the captured cases."""
    import pandas as pd

    cases = pd.read_parquet(cases_file)
    pairs: dict[tuple[str, str], tuple[int, str]] = {}
    for op, tensors, site in zip(cases["op"], cases["tensors"], cases["call_site"]):
        tensors = json.loads(tensors) if isinstance(tensors, str) else list(tensors)
        key = (base_name(op), tensors[0]["dtype"] if len(tensors) else "-")
        count, first = pairs.get(key, (0, site))
        pairs[key] = (count + 1, first)
    return pairs


def suite_pairs(run: Path) -> set[tuple[str, str]]:
    """``(op, dtype)`` of the op-level suites' records in ``run``."""
    import pandas as pd

    records = pd.read_parquet(run / "records.parquet", columns=["suite", "op", "dtype"])
    records = records[records["suite"].isin(OP_SUITES)]
    return {(str(op).split(".")[-1].lstrip("_"), str(dtype)) for op, dtype in zip(records["op"], records["dtype"])}


def report(pairs: dict[tuple[str, str], tuple[int, str]], tested: set[tuple[str, str]]) -> str:
    """The markdown report: the uncovered computing pairs, then the uncovered layout ones."""
    tested_ops = {op for op, _ in tested}
    missing = sorted((op, dtype) for op, dtype in pairs
                     if not any((name, dtype) in tested for name in (op, *ALIASES.get(op, ()))))
    lines = ["# Zoo ops the op suites never test", "",
             f"{len(pairs)} (op, dtype) pairs in the zoo's captured cases; {len(missing)} not in the op suites "
             f"({', '.join(OP_SUITES)}). Each has op cases: the captured ones (suites/zoo/captured), replayed "
             "whenever suites/zoo runs.", "",
             "| op | dtype | op tested in another dtype | captured cases | first call site |",
             "| --- | --- | --- | ---: | --- |"]
    for computing in (True, False):
        if not computing:
            lines += ["", "Layout ops and factories (views, copies, constants):", "",
                      "| op | dtype | op tested in another dtype | captured cases | first call site |",
                      "| --- | --- | --- | ---: | --- |"]
        lines += [f"| {op} | {dtype} | {'yes' if {op, *ALIASES.get(op, ())} & tested_ops else 'no'} | {pairs[(op, dtype)][0]} | "
                  f"{pairs[(op, dtype)][1]} |" for op, dtype in missing if (op not in LAYOUT) == computing]
    return "\n".join(lines) + "\n"


def main(args: list[str]) -> None:
    runs = [Path(arg) for arg in args] or [HERE.parents[1] / "reports" / "baseline"]
    text = report(model_pairs(HERE / "captured" / "cases.parquet"), set().union(*map(suite_pairs, runs)))
    (HERE / "op_coverage.md").write_text(text, encoding="utf-8")
    print(text.splitlines()[2])


if __name__ == "__main__":
    main(sys.argv[1:])
