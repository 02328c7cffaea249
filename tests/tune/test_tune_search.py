"""The search finds the planted layers (and a planted fusion defect), prunes what is not
needed, and says so when nothing needs changing or nothing can help.

The planted set is known by construction (``toy_model.py``): fc2 and fc4 see an input whose
channel 0 is 300x the others, so int8 (step 300/127 > the others' range) breaks each of them
and int16 keeps them; the other layers' int8 error is far below the 2 % bound.
"""
from __future__ import annotations

import pytest
import torch

from mluverify.errors import InvalidArgument
from mluverify.tune import tune_inference
from mluverify.tune._inference import Deployment, InferenceProblem


def _tune(toy, planted=("fc2", "fc4"), mode="layer", **options):
    """Layer by layer (``mlu:cnnl``) unless a test needs fusion: the same quantized arithmetic,
    without a graph capture per trial."""
    return tune_inference(toy["model"](planted), toy["calibration_inputs"](), toy["eval_inputs"](), mode=mode,
                          **options)


def test_the_search_returns_exactly_the_two_planted_layers(toy):
    result = _tune(toy, budget=12)
    assert result.search.status == "tuned" and result.search.passed
    assert result.changes == {"layer:fc2": "int16", "layer:fc4": "int16"}
    assert result.answer["qconfig"]["layers"] == {"fc2": "int16", "fc4": "int16"}
    assert result.answer["DEBUG_FORCED_FALLBACK_OPS"] == ""
    # the answer is minimal: each planted layer alone is not enough (judged here, outside the search)
    problem = InferenceProblem(toy["model"](("fc2", "fc4")), toy["calibration_inputs"](), toy["eval_inputs"](),
                               bound=0.02, mode="layer")
    for alone in ("fc2", "fc4"):
        assert not problem.outcome(Deployment({alone: "int16"})).passed, alone
    # and the search needed no pruning trial to know it: the scores said neither change can go
    assert not [t for t in result.search.trials if t.phase == "prune"]


def _tanh_times(factor):
    def kernel(x):
        return torch.ops.aten.tanh.default(x) * factor
    return kernel


@pytest.fixture
def planted_fused_tanh():
    """A fused-mode (cnml) tanh kernel 10 % off: only fusion groups run it; its CNNL kernel is right."""
    import mluverify.device as md

    md.kernel_registry().register("aten::tanh", _tanh_times(1.1), mode="cnml")
    yield "aten::tanh"
    md.reload_kernels()


def test_a_planted_fused_kernel_is_forced_out_of_fusion(toy, planted_fused_tanh):
    result = _tune(toy, budget=16, mode="fused")
    assert result.search.passed
    assert result.changes == {"layer:fc2": "int16", "layer:fc4": "int16", f"op:{planted_fused_tanh}": "cnnl"}
    assert result.answer["DEBUG_FORCED_FALLBACK_OPS"] == planted_fused_tanh
    # the dump's own-error ranking blamed tanh (10 % off on its own) beyond every unplanted layer
    assert result.scores[f"op:{planted_fused_tanh}"] > 0.05 > max(
        v for k, v in result.scores.items() if k not in ("layer:fc2", "layer:fc4", f"op:{planted_fused_tanh}"))


def test_pruning_removes_a_change_that_is_not_needed(toy):
    result = _tune(toy, budget=12, start={"layers": {"fc1": "int16", "fc2": "int16", "fc4": "int16"}})
    assert result.changes == {"layer:fc2": "int16", "layer:fc4": "int16"}
    pruned = [t for t in result.search.trials if t.phase == "prune" and t.passed]
    assert [sorted(t.changes) for t in pruned] == [["layer:fc2", "layer:fc4"]]  # fc1 dropped, bound held


def test_a_model_already_within_its_bound_changes_nothing(toy):
    result = _tune(toy, planted=(), budget=12)
    assert result.search.status == "within-bound" and result.search.passed
    assert result.changes == {} and len(result.search.trials) == 1
    assert result.answer["qconfig"]["layers"] == {} and result.answer["DEBUG_FORCED_FALLBACK_OPS"] == ""
    assert result.message.startswith("already within the bound")


def test_an_impossible_bound_says_so_with_the_best_found(toy):
    # MLU270 rounds even float matmuls' operands to int16, so no setting reaches 1e-12
    result = _tune(toy, budget=12, bound=1e-12)
    assert result.search.status == "impossible" and not result.search.passed
    assert result.message.startswith("no setting meets the bound")
    all_float = [t for t in result.search.trials if all(t.changes.get(f"layer:fc{i}") == "float" for i in range(1, 7))]
    assert all_float and not any(t.passed for t in all_float)
    assert f"best found rel_mse {result.search.metric:.4g}" in result.message
    assert result.search.metric == min(t.metric for t in result.search.trials)


def test_unknown_layer_names_in_a_starting_config_are_named(toy):
    with pytest.raises(InvalidArgument, match=r"names 'fc9', 'head', not layers or fused ops"):
        _tune(toy, start={"layers": {"fc9": "int16", "head": None, "fc1": "int16"}})


@pytest.mark.parametrize("budget", [0, -3, 1.5])
def test_a_budget_below_one_is_an_error(toy, budget):
    with pytest.raises(InvalidArgument, match=rf"trial budget must be an integer >= 1, got {budget}"):
        _tune(toy, budget=budget)
