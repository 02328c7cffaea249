"""The gradient probe: what ``verify(fn, *args, grad=True)`` runs and judges, leaf by leaf.

The case runs forward and backward on its target and on the CPU from the same inputs, the same
parameters and the same upstream gradient (one seeded normal tensor per floating output), inside
a *probe*: a module holding ``fn`` that returns ``(output, input gradients, parameter
gradients)`` and, when an ``optimizer`` factory is given, the parameters after one optimizer
step. Back ends run the probe like any module (copied, moved, cast to the case's dtype), so the
target's backward kernels (and its optimizer update) compute the gradients. The inputs
differentiated are the floating tensor arguments that require grad, or all of them when none
does (decided once, from the CPU arguments, for every run). The probe seeds
torch with the case's seed (0 by default) before each run: random ops (dropout) draw alike on a
device whose generator follows the CPU's algorithm.

The probe's results are *leaves*, each judged and recorded by the pipeline
(``mluverify.core.pipeline``): ``kind`` ``"output"`` (leaf ``output``), ``"grad"`` (leaf
``x.grad`` for an input named ``x`` in ``fn``'s signature, ``conv1.weight.grad`` for a
parameter) and ``"param"`` (leaf ``conv1.weight``: the parameter after the optimizer step). A
gradient is ``not_on_device`` when the op under test or its backward ran on the CPU
(``ops_on_cpu``; which ops those are, the pipeline learns from the CPU reference run). torch is imported only when a case runs.
"""
from __future__ import annotations

import copy
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from mluverify.core.case import Case
from mluverify.core.golden import run_golden
from mluverify.core.provenance import Dispatched, is_declared, ops_under_test_on_cpu
from mluverify.judge import TermSum

OUTPUT, GRAD, PARAM = "output", "grad", "param"
# The kind of a fusion group's comparison (the pipeline's); with the three above, a record's kinds.
GROUP = "group"
RECORD_KINDS = (OUTPUT, GRAD, PARAM, GROUP)


@dataclass(frozen=True)
class Leaf:
    """One judged value: what it is (``kind``), its name, and the target's, the CPU's and the
    golden result (None without one)."""

    kind: str
    name: str
    actual: Any
    expected: Any
    golden: Any = None


def gradient_probe(fn: Callable, case: Case, optimizer: Callable | None, args: tuple,
                   kwargs: Mapping[str, Any]) -> Any:
    """The probe of ``fn`` for ``case`` (a torch module; see the module docstring): call it
    with ``(probe.upstream(args, kwargs), *args)`` and ``kwargs``."""
    return _probe_class()(fn, 0 if case.seed is None else case.seed, optimizer, args, kwargs)


def probe_leaves(probe: Any, args: tuple, kwargs: Mapping[str, Any], actual: tuple, expected: tuple,
                 golden: tuple | None) -> list[Leaf]:
    """The probe's results as judged leaves: output, input gradients, parameter gradients,
    updated parameters."""
    input_names, parameter_names = probe.leaf_names(args, kwargs)
    labels = [(OUTPUT, [OUTPUT]), (GRAD, [f"{n}.grad" for n in input_names]),
              (GRAD, [f"{n}.grad" for n in parameter_names]), (PARAM, parameter_names)]
    leaves = []
    for part, (kind, part_names) in enumerate(labels[:len(actual)]):
        values = [actual[part]] if kind == OUTPUT else actual[part]
        references = [expected[part]] if kind == OUTPUT else expected[part]
        goldens = [None] * len(values) if golden is None else ([golden[part]] if kind == OUTPUT else golden[part])
        leaves += [Leaf(kind, *leaf) for leaf in zip(part_names, values, references, goldens, strict=True)]
    return leaves


def ops_on_cpu(kind: str, case: Case, fallback_ops: tuple[str, ...], dispatched: Dispatched | None) -> tuple[str, ...]:
    """The op under test among the fallbacks (``mluverify.core.provenance``): for the output its
    forward, for a gradient its backward too (with declared ``aten_ops``, their ``_backward``
    forms: ``aten::convolution_backward_overrideable`` for ``aten::convolution_overrideable``)."""
    if not case.aten_ops:
        return ops_under_test_on_cpu(case, fallback_ops, dispatched, gradient=kind != OUTPUT)
    if kind == OUTPUT:
        return ops_under_test_on_cpu(case, [op for op in fallback_ops if "_backward" not in op], None)
    return tuple(op for op in fallback_ops
                 if is_declared(case, op) or ("_backward" in op and is_declared(case, op.replace("_backward", "", 1))))


def summed_biases(probe: Any, upstream: tuple, args: tuple,
                  kwargs: Mapping[str, Any]) -> tuple[dict[str, TermSum], str]:
    """How each trained bias's gradient is summed (``mluverify.judge.TermSum``, keyed by its
    leaf, ``encoder.key.bias.grad``), from one float64 run of the probe (from ``upstream``, on
    the case's ``args``) whose biased layers record their output gradient; and why there is
    none when the float64 run raised. Only layers that add their bias to their output
    (``_biased_layers``) count: there the bias's gradient is that output gradient summed."""
    owners = _bias_owners(probe.fn)
    if not owners:
        return {}, ""
    captured: dict[str, list[tuple[int, float] | None]] = {name: [] for name in set(owners.values())}

    def hook_layers(copied: Any) -> None:
        for name, module in copied.fn.named_modules():
            if name in owners:
                module.register_forward_hook(functools.partial(_record_output_gradient, captured[owners[name]]))

    golden = run_golden(probe, (upstream, *args), kwargs, prepare=hook_layers)
    if golden.output is None:
        return {}, f"zero-sum rule unavailable ({golden.unavailable})"
    gradients = dict(zip(probe.leaf_names(args, kwargs)[1], golden.output[2]))
    summed = {}
    for parameter, calls in captured.items():
        if calls and None not in calls:
            terms, squared = sum(t for t, _ in calls), sum(s for _, s in calls)
            summed[f"{parameter}.grad"] = TermSum(gradients[parameter], terms, math.sqrt(terms * squared))
    return summed, ""


def _bias_owners(fn: Any) -> dict[str, str]:
    """``{layer name: its trained bias's parameter name}`` for the layers of ``fn`` (a module)
    that add a bias to their output; a bias shared by several layers has one name."""
    import torch

    if not isinstance(fn, torch.nn.Module):
        return {}
    names = {id(p): name for name, p in fn.named_parameters() if p.requires_grad}
    return {name: names[id(module.bias)] for name, module in fn.named_modules()
            if isinstance(module, _biased_layers()) and isinstance(module.bias, torch.nn.Parameter)
            and id(module.bias) in names}


def _biased_layers() -> tuple[type, ...]:
    """Layers whose bias is added to every position of their output (so its gradient is the
    output gradient summed over them): linear, convolutions, batch / instance / layer / group norm."""
    from torch import nn

    return (nn.Linear, nn.modules.conv._ConvNd, nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)


def _record_output_gradient(calls: list, module: Any, inputs: tuple, output: Any) -> None:
    """Forward hook: when the layer's output gradient arrives, append (summands per bias element,
    its squared norm); ``None`` when the output does not line up with the bias."""
    import torch

    if not isinstance(output, torch.Tensor) or not output.requires_grad:
        return
    if output.numel() % module.bias.numel():
        calls.append(None)
        return
    terms = output.numel() // module.bias.numel()
    output.register_hook(lambda g: calls.append((terms, float(g.double().square().sum()))))


@functools.lru_cache(maxsize=1)
def _probe_class() -> type:
    """``GradientProbe``, defined on first use (torch is imported only when a case runs)."""
    import torch
    from torch.utils import _pytree as pytree

    from mluverify.core.selections import forward_mode

    def differentiable(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.is_floating_point()

    class GradientProbe(torch.nn.Module):
        """``fn``'s forward and backward: returns (output, input gradients, parameter gradients
        [, parameters after one step of ``optimizer(parameters)``])."""

        def __init__(self, fn: Callable, seed: int, optimizer: Callable | None, args: tuple,
                     kwargs: Mapping[str, Any]) -> None:
            super().__init__()
            self.fn, self.seed, self.optimizer = fn, seed, optimizer
            self.positions = _differentiated_positions(pytree.tree_leaves((args, dict(kwargs))), differentiable)

        def _trained_parameters(self) -> list[tuple[str, torch.Tensor]]:
            if not isinstance(self.fn, torch.nn.Module):
                return []
            return [(name, p) for name, p in self.fn.named_parameters() if p.requires_grad]

        def _differentiated(self, args: tuple, kwargs: Mapping[str, Any]):
            """(call args, call kwargs, the differentiated inputs made leaves), in flatten order."""
            flat, spec = pytree.tree_flatten((args, dict(kwargs)))
            leaves = []
            for i in self.positions:
                flat[i] = flat[i].detach().requires_grad_()
                leaves.append(flat[i])
            call_args, call_kwargs = pytree.tree_unflatten(flat, spec)
            return call_args, call_kwargs, leaves

        def _outputs(self, args: tuple, kwargs: Mapping[str, Any]):
            torch.manual_seed(self.seed)
            call_args, call_kwargs, leaves = self._differentiated(args, kwargs)
            with forward_mode():  # the device's ReLU masks and max-pool argmaxes (mluverify.core.selections)
                output = self.fn(*call_args, **call_kwargs)
            outputs = [t for t in pytree.tree_leaves(output) if differentiable(t) and t.requires_grad]
            return output, outputs, leaves

        def upstream(self, args: tuple, kwargs: Mapping[str, Any]) -> tuple:
            """One seeded normal tensor per floating output (float32, CPU), from a CPU run."""
            with torch.enable_grad():
                _, outputs, _ = copy.deepcopy(self)._outputs(args, kwargs)
            generator = torch.Generator().manual_seed(self.seed)
            return tuple(torch.randn(t.shape, generator=generator) for t in outputs)

        def leaf_names(self, args: tuple, kwargs: Mapping[str, Any]) -> tuple[list[str], list[str]]:
            """Names of the differentiated inputs (from ``fn``'s signature) and parameters."""
            return _input_names(self.fn, args, kwargs, self.positions), [n for n, _ in self._trained_parameters()]

        def forward(self, upstream: tuple, *args: Any, **kwargs: Any) -> tuple:
            with torch.enable_grad():
                output, outputs, leaves = self._outputs(args, kwargs)
                if len(outputs) != len(upstream):
                    raise RuntimeError(f"{len(outputs)} differentiable outputs on this device, "
                                       f"{len(upstream)} on the CPU")
                named = self._trained_parameters()
                wrt = leaves + [p for _, p in named]
                grads = torch.autograd.grad(outputs, wrt, list(upstream), allow_unused=True,
                                            materialize_grads=True) if outputs and wrt else ()
            grads = [g.detach() for g in grads] or [torch.zeros_like(t) for t in wrt]
            result = (pytree.tree_map_only(torch.Tensor, torch.Tensor.detach, output),
                      tuple(grads[:len(leaves)]), tuple(grads[len(leaves):]))
            if self.optimizer is None:
                return result
            return (*result, self._stepped(named, grads[len(leaves):]))

        def _stepped(self, named: list, grads: list) -> tuple:
            """The parameters after one step of the optimizer, on this device."""
            for (_, parameter), grad in zip(named, grads):
                parameter.grad = grad
            self.optimizer([p for _, p in named]).step()
            return tuple(p.detach().clone() for _, p in named)

    return GradientProbe


def _differentiated_positions(flat: list, differentiable: Callable) -> tuple[int, ...]:
    """Flat positions of the inputs to differentiate: the floating tensors that require grad
    (OpInfo marks them so), or every floating tensor when none does."""
    floating = [i for i, value in enumerate(flat) if differentiable(value)]
    marked = [i for i in floating if flat[i].requires_grad]
    return tuple(marked or floating)


def _input_names(fn: Callable, args: tuple, kwargs: Mapping[str, Any], positions: tuple[int, ...]) -> list[str]:
    """``x`` (positional arguments named by ``fn``'s signature, else ``args[i]``), ``x[1]`` inside
    lists, keyword arguments by key: one name per differentiated input, in flatten order."""
    from torch.utils import _pytree as pytree

    parameters = _positional_names(fn)
    paths = [path for path, _ in pytree.tree_flatten_with_path((args, dict(kwargs)))[0]]
    names = []
    for top, key, *inner in (paths[i] for i in positions):
        if top.idx == 0:
            base = parameters[key.idx] if key.idx < len(parameters) else f"args[{key.idx}]"
        else:
            base = str(key.key)
        names.append(base + "".join(str(k) for k in inner))
    return names


def _positional_names(fn: Callable) -> list[str]:
    import torch

    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
