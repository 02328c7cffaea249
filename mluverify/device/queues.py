"""Task queues of the emulated MLU: asynchronous, in order within a queue, parallel across queues.

Seed 003 (task scheduling): "任务下发到Queue后异步执行。同一个Queue内的任务按下发先后顺序串行执行。
不同Queue间的任务并行执行。" — work sent to a Queue runs asynchronously; within one Queue in order;
different Queues in parallel.

* ``Queue(i)`` belongs to card ``i``. Inside ``with Queue(i):`` card ``i`` is the current card and
  every op on card ``i``'s tensors is *queued*: its outputs are allocated at once (shapes from
  torch's meta kernels) and it runs later on the queue's own worker thread, in the order it was
  issued, inside a copy of the issuing code's ``contextvars`` context (kernel mode, numerics).
* Outside any ``with Queue`` block a card's default queue is in effect: ops run synchronously on
  the calling thread, as a device without queues would.
* Reading values waits for the work producing them (``.cpu()``, ``.item()``, printing,
  ``as_cpu``); work on different queues that touches the same memory is ordered as it was issued
  (``_hazards``). Results are bit-identical to running everything synchronously.
* A queued op that fails stops its queue's later work; the error (a ``QueuedOpError`` naming the
  op) is raised by the next ``synchronize()`` of that queue or by reading a value it should have
  produced.
"""
from __future__ import annotations

import contextvars
import threading
import weakref
from queue import SimpleQueue
from typing import Callable, Iterable, Mapping

import torch

from mluverify.device import _storage
from mluverify.device._storage import check_card
from mluverify.device._hazards import QueuedOpError, Task, register
from mluverify.errors import MluverifyError

# card -> the Queue whose block the current code runs in (absent: the card's default queue).
_CURRENT: contextvars.ContextVar[Mapping[int, "Queue"]] = contextvars.ContextVar("mluverify_queues", default={})


class QueueResetError(MluverifyError, RuntimeError):
    """A Queue was used after its card was reset (``mlu_model.reset_device``)."""


class _Card:
    """Per-card state shared by every thread: resets so far, the workers with work to finish
    (a worker outlives its Queue object until its last task has run)."""

    def __init__(self) -> None:
        self.resets = 0
        self.workers: set[_Worker] = set()


_CARDS = tuple(_Card() for _ in range(_storage.CARDS))


class _Worker:
    """The thread that runs one queue's tasks in order; it ends after its queue is collected
    and its last task has run."""

    def __init__(self, name: str, card: _Card) -> None:
        self.name = name
        self.card = card
        self.tasks: SimpleQueue[Task | None] = SimpleQueue()
        self.last: Task | None = None
        self.failure: QueuedOpError | None = None  # the first failure not yet reported
        self.thread: threading.Thread | None = None

    def put(self, task: Task) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, args=(torch.get_num_threads(),),
                                           name=f"mluverify {self.name}", daemon=True)
            self.card.workers.add(self)
            self.thread.start()
        self.last = task
        self.tasks.put(task)

    def close(self) -> None:
        self.tasks.put(None)

    def drain(self) -> None:
        if self.last is not None:
            self.last.wait()

    def take_failure(self) -> QueuedOpError | None:
        """Wait for the queued work; the first failure since the last call (then forgotten)."""
        self.drain()
        failure, self.failure = self.failure, None
        return failure

    def _loop(self, intra_op_threads: int) -> None:
        torch.set_num_threads(intra_op_threads)  # a new thread starts with torch's default
        while (task := self.tasks.get()) is not None:
            self._execute(task)
        if self.failure is None:
            self.card.workers.discard(self)  # else kept until a card synchronisation reports it

    def _execute(self, task: Task) -> None:
        for other in task.waits_for:
            other.wait()
        broken = next((t.error for t in task.waits_for if t.error is not None), None)
        if self.failure is not None or broken is not None:
            cause = self.failure or broken
            task.finish(QueuedOpError(f"{task.op_name} was not run on {self.name}: an earlier op failed: {cause}"))
            return
        try:
            task.run()
        except Exception as exc:  # noqa: BLE001 - every failure is reported at synchronisation
            error = QueuedOpError(f"{task.op_name} failed on {self.name}: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self.failure = error
            task.finish(error)
        else:
            task.finish()


class Queue:
    """A task queue of card ``device_index`` (-1: the current card).

    ``with Queue(i):`` makes card ``i`` current and queues its ops here (then restores both);
    ``query()`` says whether all queued work is done; ``synchronize()`` waits for it and raises
    the first failure since the last synchronisation.
    """

    asynchronous = True

    def __init__(self, device_index: int = -1) -> None:
        self.device_index = check_card(device_index)
        self._resets = _CARDS[self.device_index].resets
        self._worker = _Worker(repr(self), _CARDS[self.device_index])
        self._entered: list[tuple[contextvars.Token, int]] = []
        self._order = threading.Lock()  # registration and hand-over to the worker in one step
        weakref.finalize(self, self._worker.close)

    def _check_usable(self) -> None:
        if _CARDS[self.device_index].resets != self._resets:
            raise QueueResetError(f"{self!r} was created before mlu:{self.device_index} was reset "
                                  f"(mlu_model.reset_device); create a new Queue for the card")

    def submit(self, op_name: str, run: Callable[[], None], reads: Iterable, writes: Iterable) -> Task:
        """Queue ``run`` (an op reading / writing the given device buffers) after earlier work."""
        self._check_usable()
        context = contextvars.copy_context()
        task = Task(op_name, id(self), lambda: context.run(run))
        with self._order:
            register(task, reads, writes)
            self._worker.put(task)
        return task

    def query(self) -> bool:
        """True when every op queued so far has run."""
        self._check_usable()
        return self._worker.last is None or self._worker.last.done

    def synchronize(self) -> None:
        """Wait for every op queued so far; raise the first failure since the last call."""
        self._check_usable()
        failure = self._worker.take_failure()
        if failure is not None:
            raise failure

    def __enter__(self) -> "Queue":
        self._check_usable()
        token = _CURRENT.set({**_CURRENT.get(), self.device_index: self})
        self._entered.append((token, _storage.current_card()))
        torch.accelerator.set_device_index(self.device_index)
        return self

    def __exit__(self, *exc_info: object) -> None:
        token, card = self._entered.pop()
        _CURRENT.reset(token)
        torch.accelerator.set_device_index(card)

    def __repr__(self) -> str:
        return f"Queue(device_index={self.device_index})"


class DefaultQueue(Queue):
    """A card's default queue, in effect outside any ``with Queue`` block: its ops run at once on
    the calling thread, so it is always idle and never retired by a reset."""

    asynchronous = False

    def _check_usable(self) -> None:
        """Always usable."""

    def __repr__(self) -> str:
        return f"DefaultQueue(device_index={self.device_index})"


_DEFAULTS = tuple(DefaultQueue(card) for card in range(_storage.CARDS))


def current_queue(card: int) -> Queue:
    """The queue in effect for ``card`` in the calling code."""
    return _CURRENT.get().get(card) or _DEFAULTS[card]


def queue_in_effect(card: int) -> Queue | None:
    """The asynchronous Queue whose block the calling code is in for ``card``, if any."""
    queue = _CURRENT.get().get(card)
    return queue if queue is not None and queue.asynchronous else None


def synchronize_card(card: int) -> None:
    """Wait for all queued work of ``card`` (also of Queue objects already collected); raise the
    first failure among its queues."""
    first = next((failure for failure in _take_failures(_CARDS[card]) if failure is not None), None)
    if first is not None:
        raise first


def reset_card(card: int) -> None:
    """Let the queued work of ``card`` finish, drop its failures, and retire its queues."""
    _take_failures(_CARDS[card])
    _CARDS[card].resets += 1


def _take_failures(card: _Card) -> list[QueuedOpError | None]:
    failures = []
    for worker in list(card.workers):
        failures.append(worker.take_failure())
        if not worker.thread.is_alive():  # its Queue is gone and its failure now reported
            card.workers.discard(worker)
    return failures
