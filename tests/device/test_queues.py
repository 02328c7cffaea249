"""Asynchronous queues: in order within a queue, in parallel across queues, same bits as running
everything synchronously; failures surface at the next synchronisation, naming the op."""
from __future__ import annotations

import threading
import time

import pytest
import torch
from hypothesis import given, settings, strategies as st

import mluverify.device as md
from mluverify.device import mlu_model as ct
from mluverify.device.queues import QueuedOpError, QueueResetError
from torch.utils._python_dispatch import TorchDispatchMode

WAIT_S = 60  # a bound for waits that must not happen; reached only when the code under test hangs


class _OpDevices(TorchDispatchMode):
    """Records (op, device of its first tensor argument) for every op issued."""

    def __init__(self, op_names):
        super().__init__()
        self.op_names, self.seen = op_names, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name() in self.op_names:
            self.seen.append((func.name(), str(args[0].device)))
        return func(*args, **(kwargs or {}))


def _blocking(op, release):
    """A kernel that runs ``op`` once ``release`` is set (so the test controls when work finishes)."""
    def kernel(*args, **kwargs):
        assert release.wait(WAIT_S), "the test never released the kernel"
        return op(*args, **kwargs)
    return kernel


def test_the_seeds_queue_example_runs_unchanged_on_two_cards(run_seed_script, kernel_override):
    threads = []

    def abs_kernel(x):
        threads.append(threading.current_thread().name)
        return torch.abs(x)

    kernel_override("aten::abs", abs_kernel)
    with _OpDevices({"aten::abs"}) as issued:
        script = run_seed_script("queue_example.py")
    for card in (0, 1):
        ct.synchronize(card)  # also the work of the script's Queue objects, already collected
    assert issued.seen == [("aten::abs", "mlu:0"), ("aten::abs", "mlu:1"), ("aten::abs", "mlu:0")]
    main = threading.current_thread().name
    # Outside a Queue block the default queue runs ops on the caller; inside, the queue's worker.
    assert threads == [main, "mluverify Queue(device_index=1)", "mluverify Queue(device_index=0)"]
    assert script["out"].device == torch.device("mlu:0")
    assert torch.equal(script["out"].cpu(), script["x"].abs())
    assert ct.current_device() == 0


def test_query_synchronize_and_reading_wait_for_the_queued_work(kernel_override):
    release = threading.Event()
    kernel_override("aten::neg", _blocking(torch.neg, release))
    x = torch.arange(6.0).to("mlu")
    queue = ct.Queue(0)
    with queue:
        y = torch.neg(x)
        z = y * 2
    assert z.shape == (6,) and z.device == torch.device("mlu:0"), "outputs exist before the work ran"
    assert queue.query() is False
    threading.Timer(0.2, release.set).start()
    assert torch.equal(z.cpu(), -2 * torch.arange(6.0)), "reading z waited for neg and mul"
    queue.synchronize()
    assert queue.query() is True


def test_two_queues_run_at_the_same_time(kernel_override):
    # Each queued kernel waits until the other has started: on one worker they would deadlock
    # until the bound, so finishing proves the two queues overlapped.
    started = {"first": threading.Event(), "second": threading.Event()}

    def rendezvous(x):
        mine, other = ("first", "second") if x[0] == 0 else ("second", "first")
        started[mine].set()
        assert started[other].wait(WAIT_S), "the other queue's op never started while this one ran"
        return torch.sin(x)

    kernel_override("aten::sin", rendezvous)
    queues = [ct.Queue(0), ct.Queue(0)]
    inputs = [torch.tensor([0.0, 1.0]).to("mlu"), torch.tensor([1.0, 2.0]).to("mlu")]
    outputs = []
    for queue, x in zip(queues, inputs):
        with queue:
            outputs.append(torch.sin(x))
    for queue in queues:
        queue.synchronize()
    assert all(torch.equal(o.cpu(), x.cpu().sin()) for o, x in zip(outputs, inputs))


def test_a_failing_queued_op_surfaces_at_the_next_synchronisation(kernel_override):
    def boom(x):
        raise RuntimeError("boom")

    kernel_override("aten::sigmoid", boom)
    x = torch.randn(4).to("mlu")
    queue = ct.Queue(0)
    with queue:
        y = torch.sigmoid(x)  # no error while issuing
        z = y + 1
        w = x * 2
    with pytest.raises(QueuedOpError, match=r"aten::sigmoid failed on Queue\(device_index=0\): RuntimeError: boom"):
        queue.synchronize()
    for never_computed in (y, z, w):
        with pytest.raises(QueuedOpError, match="aten::sigmoid"):
            never_computed.cpu()
    queue.synchronize()  # reported once; the queue works again
    with queue:
        v = x * 3
    assert torch.equal(v.cpu(), x.cpu() * 3)


def test_card_synchronize_raises_a_failure_of_any_of_its_queues(kernel_override):
    kernel_override("aten::tanh", lambda x: (_ for _ in ()).throw(ValueError("bad input")))
    with ct.Queue(1):
        torch.tanh(torch.ones(2, device="mlu"))
    with pytest.raises(QueuedOpError, match="aten::tanh failed .* ValueError: bad input"):
        ct.synchronize(1)


def test_queued_ops_run_with_the_issuing_code_s_context(kernel_override):
    # The fallback rule is a ContextVar: set around the issuing code, it governs the op on the worker.
    kernel_override("aten::exp", lambda x: (_ for _ in ()).throw(RuntimeError("kernel bug")))
    x = torch.tensor([0.0, 1.0]).to("mlu")
    queue = ct.Queue(0)
    with md.track_fallbacks() as tracked:
        with md.fallback_rule("seed"), queue:
            y = torch.exp(x)
        queue.synchronize()  # a queued op's run-time fallback is recorded when it runs
    assert torch.equal(y.cpu(), torch.exp(torch.tensor([0.0, 1.0])))
    assert tracked.reasons["aten::exp"] == ["kernel failed: RuntimeError: kernel bug"]


def test_random_ops_draw_in_program_order_even_inside_a_queue():
    def program(queue):
        torch.manual_seed(7)
        a = torch.zeros(5).to("mlu")
        with queue:
            a.normal_()
            b = torch.rand(5)  # a CPU draw right after the device's
        return a.cpu(), b

    synchronous = program(ct.current_queue())
    queued = program(ct.Queue(0))
    assert torch.equal(synchronous[0], queued[0]) and torch.equal(synchronous[1], queued[1])


def test_ops_whose_shape_depends_on_data_run_in_order_inside_a_queue():
    x = torch.tensor([3.0, -1.0, 2.0, -5.0]).to("mlu")
    queue = ct.Queue(0)
    with queue:
        y = x * -1
        kept = torch.masked_select(y, y > 0)  # needs y's values: runs after the queued mul
    assert torch.equal(kept.cpu(), torch.tensor([1.0, 5.0]))


def test_copies_between_cards_and_non_blocking_copies_inside_queues():
    x = torch.randn(3, 4)
    source = x.to("mlu:0")
    queue = ct.Queue(1)
    with queue:
        on_card1 = source.to("mlu")  # the current card inside Queue(1) is card 1
        doubled = on_card1 * 2
        host = doubled.to("cpu", non_blocking=True)
    queue.synchronize()  # a non_blocking copy to the host is complete after synchronising
    assert on_card1.device == torch.device("mlu:1") and host.is_pinned()
    assert torch.equal(host, x * 2)
    back = host.to("mlu:0", non_blocking=True)
    assert torch.equal(back.cpu(), x * 2)


def test_a_queue_used_after_its_card_was_reset_raises_naming_the_card():
    queue = ct.Queue(1)
    with queue:
        torch.ones(3, device="mlu") + 1
    ct.reset_device(1)
    for use in (queue.synchronize, queue.query, queue.__enter__):
        with pytest.raises(QueueResetError, match=r"Queue\(device_index=1\) was created before mlu:1 was reset"):
            use()
    with ct.Queue(1) as fresh:
        y = torch.ones(3, device="mlu") + 1
    fresh.synchronize()
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))


def test_a_small_network_on_two_queues_gives_the_same_bits_as_synchronously():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 7 * 7, 10), torch.nn.Softmax(1)).eval().to("mlu")
    inputs = [torch.randn(2, 3, 16, 16).to("mlu") for _ in range(2)]
    with torch.no_grad():
        expected = [model(x).cpu() for x in inputs]
        queues = [ct.Queue(0), ct.Queue(0)]
        outputs = []
        for queue, x in zip(queues, inputs):
            with queue:
                outputs.append(model(x))
    assert all(torch.equal(o.cpu(), e) for o, e in zip(outputs, expected))


# -- ordering under concurrency ---------------------------------------------------------------
# A program is a list of steps over a pool of tensors; each step runs on the default queue or on
# one of two queues of card 0. Slow steps (kernels that sleep first) let the other queue run
# ahead, so a missing wait shows. Whatever the interleaving, every value read and every final
# tensor must be the bits of running the program synchronously.
STEP = st.tuples(st.sampled_from([0, 1, None]),
                 st.sampled_from(["slow", "slow_", "scale", "add_", "mm", "copy_", "read"]),
                 st.integers(0, 2), st.integers(0, 2), st.sampled_from([0.5, -1.0, 2.0]))


def _slowly(op):
    def kernel(*args):
        time.sleep(0.02)
        return op(*args)
    return kernel


@pytest.mark.parametrize("program", [
    pytest.param([(0, "slow", 0, 1, 1.0), (1, "scale", 1, 2, 2.0)], id="read-after-write"),
    pytest.param([(0, "slow", 0, 1, 1.0), (1, "add_", 2, 0, 2.0)], id="write-after-read"),
    pytest.param([(0, "slow_", 0, 0, 1.0), (1, "copy_", 1, 0, 1.0)], id="write-after-write"),
    pytest.param([(0, "slow", 0, 1, 1.0), (None, "add_", 2, 1, 1.0)], id="synchronous-write-after-queued-write"),
])
def test_queues_wait_for_each_other_where_they_share_memory(slow_neg, program):
    synchronous_reads, synchronous = _run(program, None)
    reads, final = _run(program, [ct.Queue(0), ct.Queue(0)])
    assert reads == synchronous_reads
    assert all(torch.equal(a, b) for a, b in zip(final, synchronous))


def _run(program, queues):
    generator = torch.Generator().manual_seed(3)
    pool = [torch.randn(48, 48, generator=generator).to("mlu") for _ in range(3)]
    reads = []
    for queue_index, kind, src, dst, constant in program:
        with ct.current_queue() if queues is None or queue_index is None else queues[queue_index]:
            if kind == "scale":
                pool[dst] = pool[src] * constant
            elif kind == "add_":
                pool[dst].add_(pool[src], alpha=constant)
            elif kind == "mm":
                pool[dst] = (pool[src] @ pool[dst]) / 48
            elif kind == "copy_":
                pool[dst].copy_(pool[src])
            elif kind == "slow":
                pool[dst] = torch.neg(pool[src])
            elif kind == "slow_":
                pool[dst].neg_()
            else:
                reads.append(pool[src].sum().item())
    for queue in queues or ():
        queue.synchronize()  # the program's end: every queued op has run
    return reads, [t.cpu() for t in pool]


@pytest.fixture
def slow_neg(kernel_override):
    kernel_override("aten::neg", _slowly(torch.neg))
    kernel_override("aten::neg_", _slowly(torch.Tensor.neg_))


@settings(max_examples=40)
@given(program=st.lists(STEP, min_size=1, max_size=14))
def test_any_interleaving_of_queued_steps_gives_the_synchronous_bits(slow_neg, program):
    synchronous_reads, synchronous = _run(program, None)
    reads, final = _run(program, [ct.Queue(0), ct.Queue(0)])
    assert reads == synchronous_reads
    assert all(torch.equal(a, b) for a, b in zip(final, synchronous))


def test_torch_mlu_synchronize_waits_for_the_card_s_queues(kernel_override):
    release = threading.Event()
    kernel_override("aten::neg", _blocking(torch.neg, release))
    queue = ct.Queue(1)
    with queue:
        y = torch.neg(torch.ones(2, device="mlu"))
    threading.Timer(0.2, release.set).start()
    torch.mlu.synchronize("mlu:1")
    assert queue.query() is True and torch.equal(y.cpu(), -torch.ones(2))


def test_an_output_reshaped_in_place_before_its_op_ran_gets_the_right_values(kernel_override):
    # stft squeezes and transposes its result in place right after issuing the op that makes it.
    release = threading.Event()
    kernel_override("aten::neg", _blocking(torch.neg, release))
    x = torch.arange(6.0).reshape(1, 2, 3)
    queue = ct.Queue(0)
    with queue:
        y = torch.neg(x.to("mlu"))
        y.squeeze_(0).transpose_(0, 1)
    release.set()
    assert torch.equal(y.cpu(), -x[0].t())


def test_read_bytes_reads_a_view_s_first_values_once_its_queued_writer_ran(kernel_override):
    release = threading.Event()
    kernel_override("aten::neg", _blocking(torch.neg, release))
    x = torch.arange(8.0).to("mlu")
    with ct.Queue(0):
        y = torch.neg(x)
    threading.Timer(0.2, release.set).start()
    first = md.read_bytes(y[3:], 2 * y.element_size())
    assert torch.equal(torch.frombuffer(bytearray(first), dtype=torch.float32),
                       torch.tensor([-3.0, -4.0])), "read_bytes waited for neg, from the view's offset"
