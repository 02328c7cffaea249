"""Multi-core reductions of the emulated MLU, as pure functions on float32 CPU tensors.

One rule for every reduction (sum, mean, var / std, softmax / log-softmax, batch / layer /
group norm, average pooling; the matmul class in ``contractions``):

1. The reduced elements, in row-major order of the reduced dims (a pooling window in
   row-major order of its positions), are split into ``cores`` contiguous parts of
   ``ceil(E / cores)`` elements; the last parts are shorter or empty (``core_sum_last``).
2. Each core accumulates its part in float32 in ``LANES`` (64) vector lanes: element ``j`` of
   the part goes to lane ``j mod 64``; each lane adds its elements in order, every add rounded
   to float32; the lane sums are then added pairwise in float32, neighbours first
   (``part_sums``).
3. The ``cores`` partials (a power of two; empty parts give +0) are combined pairwise in
   float32, neighbours first: ``((p0 + p1) + (p2 + p3))`` (``combine_pairwise``).

Everything after the sums is float32 arithmetic, one rounding per operation, in the order
each function's docstring gives; ``exp``, ``log`` and ``sqrt`` are taken in float64 and rounded
once to float32 (``sqrt`` so correctly rounded; torch's float32 ``sqrt`` is not on every CPU).
So an independent numpy computation reproduces every result bit for bit
(``tests/device/test_reductions.py``), and results depend on ``cores``, deterministically.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F

_F32 = torch.float32
_F64 = torch.float64

# Vector lanes per core: this project's choice (the seeds give none), a 256-byte float32
# vector. It only matters for parts longer than 64 elements; below that a part is a pairwise tree.
LANES = 64


def combine_pairwise(partials: torch.Tensor, overwrite: bool = False) -> torch.Tensor:
    """Sum the last dim (a power of two) in float32 as a balanced tree, neighbours first.
    ``overwrite``: ``partials`` is scratch (a product's fresh partials): the levels below the
    last are summed in place; the last sum is a new tensor, so the partials can be freed."""
    count = partials.shape[-1]
    if count & (count - 1):
        raise ValueError(f"combine_pairwise needs a power-of-two number of partials, got {count}")
    # The partials' dim moved first (a view): each level adds two halves made of whole blocks
    # (a convolution's partials are a view with the cores outermost) instead of every other
    # element of the last dim, which was most of a training step's cost on MLU370. The same
    # float32 adds, so the same bits (in place too: no new block to allocate and fault in).
    levels = partials.movedim(-1, 0)
    while levels.shape[0] > 2:
        evens, odds = levels[0::2], levels[1::2]
        levels = evens.add_(odds) if overwrite else evens + odds
    return levels[0] + levels[1] if levels.shape[0] == 2 else levels[0]


def part_sums(parts: torch.Tensor) -> torch.Tensor:
    """Each core's float32 sum of its part (the last dim of ``parts``, ``(..., cores, size)``),
    accumulated in ``LANES`` lanes. A part shorter than 64 uses the next power of two of lanes:
    the missing lanes hold +0, which the pairwise tree adds exactly."""
    size = parts.shape[-1]
    lanes = min(LANES, 1 << max(size - 1, 0).bit_length())
    steps = -(-size // lanes)
    if steps * lanes != size:
        parts = F.pad(parts, (0, steps * lanes - size))
    rows = parts.reshape(*parts.shape[:-1], steps, lanes)
    if steps == 1:
        return combine_pairwise(rows[..., 0, :])
    # Each lane from +0, its elements added in order in float32, by the device's C++ extension
    # on every intra-op thread (torch's CPU sum would cascade them).
    outer = math.prod(rows.shape[:-2])
    lane_sums = torch.ops.mluverify_native.lane_sums(rows.detach().reshape(outer, steps, lanes))
    return combine_pairwise(lane_sums.reshape(*rows.shape[:-2], lanes))


def core_sum_last(x: torch.Tensor, cores: int) -> torch.Tensor:
    """The per-core sum of float32 ``x`` over its last dim (that dim removed)."""
    extent = x.shape[-1]
    if extent == 0:
        return torch.zeros(x.shape[:-1], dtype=_F32)
    size = -(-extent // cores)
    if size * cores != extent:
        x = F.pad(x, (0, size * cores - extent))
    return combine_pairwise(part_sums(x.reshape(*x.shape[:-1], cores, size)))


def _normalized_dims(x: torch.Tensor, dims: Sequence[int] | None) -> list[int]:
    """Reduced dims as sorted non-negative indices; None or [] means every dim."""
    rank = max(x.dim(), 1)
    if not dims:
        return list(range(x.dim()))
    return sorted({d % rank for d in dims})


def core_sum(x: torch.Tensor, dims: Sequence[int] | None, cores: int, keepdim: bool = False) -> torch.Tensor:
    """``x.sum(dims, keepdim)`` as ``cores`` cores compute it (float32 ``x``)."""
    reduced = _normalized_dims(x, dims)
    scalar = x.dim() == 0
    if scalar:
        x = x.reshape(1)
    kept = [d for d in range(x.dim()) if d not in reduced]
    extent = math.prod(x.shape[d] for d in reduced)  # not -1: kept dims may hold no element
    moved = x.permute(*kept, *reduced).reshape(*(x.shape[d] for d in kept), extent) if reduced else x.unsqueeze(-1)
    total = core_sum_last(moved, cores)
    if scalar:
        return total.reshape(())
    if keepdim:
        return total.reshape([1 if d in reduced else x.shape[d] for d in range(x.dim())])
    return total


def reduced_extent(x: torch.Tensor, dims: Sequence[int] | None) -> int:
    if x.dim() == 0:
        return 1
    return math.prod(x.shape[d] for d in _normalized_dims(x, dims))


def core_mean(x: torch.Tensor, dims: Sequence[int] | None, cores: int, keepdim: bool = False) -> torch.Tensor:
    """``core_sum / E`` (float32 division; E the number of reduced elements)."""
    return core_sum(x, dims, cores, keepdim) / _f32(reduced_extent(x, dims))


def core_var(x: torch.Tensor, dims: Sequence[int] | None, cores: int, correction: float = 1,
             keepdim: bool = False) -> torch.Tensor:
    """Two passes: ``d = x - mean`` (mean as ``core_mean``), squares ``d * d`` in float32,
    their per-core sum, divided by ``max(E - correction, 0)``."""
    mean = core_mean(x, dims, cores, keepdim=True)
    deviation = x - mean
    squares = core_sum(deviation * deviation, dims, cores, keepdim)
    return squares / _f32(max(reduced_extent(x, dims) - correction, 0))


def softmax(x: torch.Tensor, dim: int, cores: int, log: bool = False) -> torch.Tensor:
    """``z = x - max``; ``e = fl32(exp(z))``; ``s`` the per-core sum of ``e`` over ``dim``;
    softmax ``e / s``, log-softmax ``z - fl32(log(s))``."""
    if x.numel() == 0:
        return x.clone()
    shifted = x - x.amax(dim, keepdim=True)
    exponentials = shifted.to(_F64).exp().to(_F32)
    total = core_sum(exponentials, [dim], cores, keepdim=True)
    if log:
        return shifted - total.to(_F64).log().to(_F32)
    return exponentials / total


def _normalize(x: torch.Tensor, dims: Sequence[int], eps: float, cores: int) -> tuple[torch.Tensor, ...]:
    """``(d * rstd, mean, var, rstd)`` over ``dims`` (keepdim), with ``d = x - mean``, the
    biased variance ``var = sum(d * d) / E`` and ``rstd = 1 / sqrt(var + fl32(eps))``."""
    mean = core_mean(x, dims, cores, keepdim=True)
    deviation = x - mean
    variance = core_sum(deviation * deviation, dims, cores, keepdim=True) / _f32(reduced_extent(x, dims))
    rstd = sqrt(variance + _f32(eps)).reciprocal()
    return deviation * rstd, mean, variance, rstd


def _affine(y: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
            shape: Sequence[int]) -> torch.Tensor:
    """``y * weight + bias`` (each optional), parameters viewed as ``shape``."""
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None,
               bias: torch.Tensor | None, eps: float, cores: int) -> tuple[torch.Tensor, ...]:
    """``native_layer_norm``: ``(out, mean, rstd)``, statistics shaped ``x.shape[:axis] + (1,...)``."""
    axis = x.dim() - len(normalized_shape)
    y, mean, _, rstd = _normalize(x, range(axis, x.dim()), eps, cores)
    return _affine(y, weight, bias, tuple(normalized_shape)), mean, rstd


def group_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, n: int,
               channels: int, hw: int, groups: int, eps: float, cores: int) -> tuple[torch.Tensor, ...]:
    """``native_group_norm``: ``(out, mean [N, G], rstd [N, G])``."""
    grouped = x.reshape(n, groups, -1)
    y, mean, _, rstd = _normalize(grouped, [2], eps, cores)
    out = _affine(y.reshape(n, channels, hw), weight, bias, (1, channels, 1))
    return out.reshape(x.shape), mean.reshape(n, groups), rstd.reshape(n, groups)


def batch_norm_training(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                        running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                        momentum: float, eps: float, cores: int) -> tuple[torch.Tensor, ...]:
    """Batch statistics over every dim but the channel (dim 1): ``(out, mean, invstd)``.

    The running statistics (when given) are updated in place, in float32:
    ``r * fl32(1 - momentum) + stat * fl32(momentum)``, the variance made unbiased first as
    ``var * fl32(E / (E - 1))``.
    """
    dims = [0, *range(2, x.dim())]
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    y, mean, variance, invstd = _normalize(x, dims, eps, cores)
    out = _affine(y, weight, bias, shape)
    mean, variance, invstd = mean.reshape(-1), variance.reshape(-1), invstd.reshape(-1)
    if running_mean is not None:
        _update_running(running_mean, mean, momentum)
    if running_var is not None:
        extent = reduced_extent(x, dims)
        correction = extent / (extent - 1) if extent > 1 else math.inf
        _update_running(running_var, variance * _f32(correction), momentum)
    return out, mean, invstd


def _update_running(running: torch.Tensor, statistic: torch.Tensor, momentum: float) -> None:
    updated = running.to(_F32) * _f32(1 - momentum) + statistic * _f32(momentum)
    running.copy_(updated)


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 square root (torch's float32 ``sqrt`` is not, on every CPU)."""
    return x.to(_F64).sqrt().to(_F32)


def _f32(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=_F32)


# ---------------------------------------------------------------------------------------------
# average pooling
# ---------------------------------------------------------------------------------------------


def pool_output_size(length: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """torch's pooling output length (a last window starting in the right padding is dropped)."""
    span = length + 2 * padding - kernel
    size = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (size - 1) * stride >= length + padding:
        size -= 1
    return size


def _divisors(length: int, out: int, kernel: int, stride: int, padding: int, include_pad: bool) -> torch.Tensor:
    """Per output position of one dim: the window's element count as torch's avg_pool divides."""
    start = torch.arange(out) * stride - padding
    end = torch.clamp(start + kernel, max=length + padding)
    if include_pad:
        return end - start
    return torch.clamp(end, max=length) - torch.clamp(start, min=0)


def avg_pool(x: torch.Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             ceil_mode: bool, count_include_pad: bool, divisor_override: int | None, cores: int) -> torch.Tensor:
    """``avg_poolNd`` over the last ``len(kernel)`` dims: each window's per-core sum (padding
    and the ceil-mode overhang count as zeros in the window's extent), divided in float32 by
    torch's divisor."""
    nd = len(kernel)
    lengths = x.shape[-nd:]
    outs = [pool_output_size(n, k, s, p, ceil_mode) for n, k, s, p in zip(lengths, kernel, stride, padding)]
    pads: list[int] = []
    for n, o, k, s, p in reversed(list(zip(lengths, outs, kernel, stride, padding))):
        pads += [p, max(0, (o - 1) * s + k - p - n)]
    windows = F.pad(x, pads)
    for i, (o, k, s) in enumerate(zip(outs, kernel, stride)):
        dim = x.dim() - nd + i
        windows = windows.unfold(dim, k, s).narrow(dim, 0, o)
    total = core_sum_last(windows.reshape(*windows.shape[:x.dim()], -1), cores)
    if divisor_override:
        return total / _f32(divisor_override)
    divisor = torch.ones((), dtype=torch.int64)
    for n, o, k, s, p in zip(lengths, outs, kernel, stride, padding):
        divisor = divisor.unsqueeze(-1) * _divisors(n, o, k, s, p, count_include_pad)
    return total / divisor.to(_F32)


def adaptive_avg_pool(x: torch.Tensor, output_size: Sequence[int], cores: int) -> torch.Tensor:
    """``_adaptive_avg_poolNd``: window ``o`` of a dim of length L is
    ``[floor(o L / O), ceil((o + 1) L / O))``; each window's per-core sum over its own
    elements (row-major), divided in float32 by its element count."""
    nd = len(output_size)
    lengths = x.shape[-nd:]
    if all(n % o == 0 for n, o in zip(lengths, output_size) if o):
        kernel = [n // o for n, o in zip(lengths, output_size)]
        return avg_pool(x, kernel, kernel, [0] * nd, False, True, None, cores)
    values, counts, offsets = x, [], []
    for i, (n, o) in enumerate(zip(lengths, output_size)):
        start = torch.arange(o) * n // o
        count = -((-(torch.arange(o) + 1) * n) // o) - start
        slots = torch.arange(int(count.max()))
        index = torch.clamp(start.unsqueeze(1) + slots, max=n - 1)
        dim = x.dim() - nd + 2 * i  # each earlier dim became (O, K)
        values = values.index_select(dim, index.reshape(-1)).unflatten(dim, (o, len(slots)))
        valid = (slots < count.unsqueeze(1)).reshape([1] * dim + [o, len(slots)] + [1] * (values.dim() - dim - 2))
        values = torch.where(valid, values, 0.0)
        counts.append(count)
        offsets.append(slots)
    # (..., O1, K1, O2, K2, ...) -> (..., O1, O2, ..., K1 K2 ...)
    lead = x.dim() - nd
    order = [*range(lead), *(lead + 2 * i for i in range(nd)), *(lead + 2 * i + 1 for i in range(nd))]
    values = values.permute(order)
    values = values.reshape(*values.shape[:lead + nd], -1)
    element_index, extent = _window_flat_index(counts, offsets)
    part_size = (-(-extent // cores)).unsqueeze(-1)
    part = torch.div(element_index, part_size, rounding_mode="floor").clamp_(max=cores - 1)
    # Each slot's place in its window's parts, (part, offset in the part) flattened; a slot
    # beyond its window holds +0 and is clamped into the last part, where it adds nothing.
    longest = int(part_size.max())
    offset = (element_index - part * part_size).clamp_(max=longest - 1)
    place = part * longest + offset
    parts = torch.zeros(*values.shape[:-1], cores * longest, dtype=_F32)
    parts.scatter_add_(-1, place.expand(*values.shape[:-1], place.shape[-1]), values)
    partials = part_sums(parts.unflatten(-1, (cores, longest)))
    return combine_pairwise(partials) / extent.to(_F32)


def _window_flat_index(counts: list[torch.Tensor], offsets: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """For every output position (O1, O2, ...) and window slot (K1 K2 ... flattened): the slot's
    row-major index in its real window (``sum_i k_i * prod_{j>i} count_j``); and each window's
    element count (shape (O1, O2, ...)). Slots beyond a window hold zeros: their index is
    clamped into the last part, where adding zero changes nothing."""
    nd = len(counts)

    def along(values: torch.Tensor, position: int) -> torch.Tensor:
        return values.reshape([1] * position + [-1] + [1] * (2 * nd - position - 1))

    index = torch.zeros((), dtype=torch.int64)
    stride = torch.ones((), dtype=torch.int64)
    for i in reversed(range(nd)):
        index = index + along(offsets[i], nd + i) * stride
        stride = stride * along(counts[i], i)
    outputs = [len(c) for c in counts]
    index = index.expand(*outputs, *(len(k) for k in offsets)).reshape(*outputs, -1)
    extent = stride.reshape(outputs)
    return index, extent
