"""Per network on ``cpu:inductor``: compile time, and run time compiled against eager.

    PYTHONPATH=. .venv/bin/python benchmarks/inductor_networks.py [--cold] [--repeat N] [--threads N] [--only NAME ...]

The networks of ``suites/networks`` in their default-selection size (small inputs), float32, as
the suite builds them (seeded weights, eval mode), under ``torch.no_grad()``. For each: the
compile time of the first call (TorchDynamo's compilation metrics, as records' ``compile_s``;
``--cold``: in a fresh Inductor cache directory, else with the caches as they are), the median
run time of ``--repeat`` calls compiled and eager after one warm-up call, and their ratio. The load
average is printed beside each row: the machine may be shared, compare rows taken at a similar load.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "suites" / "networks"))

from test_networks import NETWORKS, model_and_input  # noqa: E402  (the suite's networks, as it builds them)

from compare_cost import median_seconds  # noqa: E402  (benchmarks/ is the script's directory)

from mluverify.plugins.inductor_backend import CompileWatch, compile_fresh  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="compile in a fresh Inductor cache directory")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME", help="networks to measure")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's); 1 is steadier on a shared machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cold:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cache-")
    chosen = [net for net in NETWORKS if net.default != () and (args.only is None or net.name in args.only)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{'cold' if args.cold else 'warm (as found)'} Inductor caches")
    print(f"{'network':26} {'compile s':>9} {'breaks':>6} {'eager ms':>9} {'inductor ms':>11} {'eager/ind':>9}  load")
    for net in chosen:
        model, x = model_and_input(net)
        compiled = compile_fresh(model)
        with torch.no_grad():
            with CompileWatch() as watch:
                compiled(x)
            eager_s = median_seconds(lambda: model(x), args.repeat)
            compiled_s = median_seconds(lambda: compiled(x), args.repeat)
        print(f"{net.name:26} {watch.compile_s:9.1f} {watch.graph_breaks:6d} {eager_s * 1e3:9.2f} "
              f"{compiled_s * 1e3:11.2f} {eager_s / compiled_s:9.2f}  {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
