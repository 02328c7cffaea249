"""Two Queues running independent torchvision ResNet-50 forwards (batch 1, 224x224, eval, seeded
random weights) vs the same two forwards one after the other, one torch intra-op thread each,
measured side by side in one run on the emulated MLU.

    PYTHONPATH=. .venv/bin/python benchmarks/queue_resnet50.py [--repeats 5] [--cards 2]

Each round times both ways on the same models and inputs (the order alternates between rounds);
prints the medians, their ratio (target: two queues <= 0.65x of one after the other on 2 cores),
the machine's load average before and after (other processes share the cores), and checks that
the queued outputs are bit-identical to the sequential ones.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cards", type=int, choices=(1, 2), default=2,
                        help="2: one queue on each of two cards; 1: both queues on card 0")
    args = parser.parse_args()
    os.environ.setdefault("MLUVERIFY_DEVICE_COUNT", str(args.cards))

    import torch
    import torchvision

    from mluverify.device import mlu_model as ct

    torch.set_num_threads(1)  # each queue's worker then computes with one intra-op thread too
    cards = list(range(args.cards)) * (2 // args.cards)
    torch.manual_seed(0)
    models = [torchvision.models.resnet50(weights=None).eval().to(f"mlu:{card}") for card in cards]
    images = [torch.randn(1, 3, 224, 224).to(f"mlu:{card}") for card in cards]
    queues = [ct.Queue(card) for card in cards]

    def sequential() -> list:
        return [model(image).cpu() for model, image in zip(models, images)]

    def on_queues() -> list:
        outputs = []
        for queue, model, image in zip(queues, models, images):
            with queue:
                outputs.append(model(image))
        for queue in queues:
            queue.synchronize()
        return [output.cpu() for output in outputs]

    load_before = os.getloadavg()
    times = {"sequential": [], "queues": []}
    with torch.no_grad():
        expected = sequential()  # warm-up: prepared-weight caches, meta kernels
        identical = all(torch.equal(a, b) for a, b in zip(on_queues(), expected))
        for round_index in range(args.repeats):
            ways = [("sequential", sequential), ("queues", on_queues)]
            for name, run in ways[:: 1 if round_index % 2 == 0 else -1]:
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    sequential_s, queues_s = (statistics.median(times[name]) for name in ("sequential", "queues"))
    print(f"{args.repeats} rounds, torch threads {torch.get_num_threads()}, queues on cards {cards}, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before / {os.getloadavg()[0]:.1f} after")
    print(f"two forwards one after the other  median {sequential_s * 1e3:8.1f} ms")
    print(f"two forwards on two queues        median {queues_s * 1e3:8.1f} ms")
    print(f"ratio queues / one after the other       {queues_s / sequential_s:8.2f}x   (target <= 0.65x)")
    print(f"queued outputs bit-identical to sequential: {identical}")


if __name__ == "__main__":
    main()
