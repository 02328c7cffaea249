"""Two Queues running independent torchvision ResNet-50 forwards (batch 1, 224x224, eval, seeded
random weights) vs the same two forwards one after the other, one torch intra-op thread each,
measured side by side in one run on the emulated MLU.

    PYTHONPATH=. .venv/bin/python benchmarks/queue_resnet50.py [--repeats 5] [--cards 2]

Each round times both ways on the same models and inputs (the order alternates between rounds);
prints the medians, their ratio (target: two queues <= 0.65x of one after the other on 2 cores),
the machine's load average before and after, and checks that the queued outputs are
bit-identical to the sequential ones. Because other processes may share the cores, each round
also times a control without the emulator: the same two forwards on the CPU in two plain
threads vs one after the other; its ratio is what the machine allowed that moment (about 0.5x
with two idle cores, about 1x when they are busy).
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
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

    cpu_models = [torchvision.models.resnet50(weights=None).eval() for _ in cards]
    cpu_images = [image.cpu() for image in images]

    def cpu_sequential() -> None:
        for model, image in zip(cpu_models, cpu_images):
            model(image)

    def cpu_threads() -> None:
        threads = [threading.Thread(target=_one_thread_forward, args=(m, i)) for m, i in zip(cpu_models, cpu_images)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    load_before = os.getloadavg()
    times = {name: [] for name in ("sequential", "queues", "cpu sequential", "cpu threads")}
    with torch.no_grad():
        expected = sequential()  # warm-up: prepared-weight caches, meta kernels
        identical = all(torch.equal(a, b) for a, b in zip(on_queues(), expected))
        cpu_threads()
        for round_index in range(args.repeats):
            ways = [("sequential", sequential), ("queues", on_queues),
                    ("cpu sequential", cpu_sequential), ("cpu threads", cpu_threads)]
            for name, run in ways[:: 1 if round_index % 2 == 0 else -1]:
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.repeats} rounds, torch threads {torch.get_num_threads()}, queues on cards {cards}, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before / {os.getloadavg()[0]:.1f} after")
    print(f"mlu: two forwards one after the other  median {median['sequential'] * 1e3:8.1f} ms")
    print(f"mlu: two forwards on two queues        median {median['queues'] * 1e3:8.1f} ms")
    print(f"ratio queues / one after the other            {median['queues'] / median['sequential']:8.2f}x"
          f"   (target <= 0.65x)")
    print(f"control, CPU without the emulator: two threads / one after the other "
          f"{median['cpu threads'] / median['cpu sequential']:.2f}x "
          f"({median['cpu threads'] * 1e3:.1f} / {median['cpu sequential'] * 1e3:.1f} ms)")
    print(f"queued outputs bit-identical to sequential: {identical}")


def _one_thread_forward(model, image) -> None:
    import torch

    torch.set_num_threads(1)  # a new thread starts with torch's default
    with torch.no_grad():
        model(image)


if __name__ == "__main__":
    main()
