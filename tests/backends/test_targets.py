"""The torch-device targets: what each resolves to, why it is skipped where it cannot run, and
how the eager modes treat dtypes and CUDA's TF32 switch."""
from __future__ import annotations

import pytest
import torch

from mluverify.core.backends import BackendRegistry
from mluverify.core.case import Case, Target
from mluverify.core.plugin_manager import call_hook, new_plugin_manager
from mluverify.plugins.inductor_backend import cpp_compiler_missing
from mluverify.plugins.torch_devices import TorchDeviceBackend, cuda_fp32_precision

NEW_TARGETS = {"cpu:inductor": "cnml", "cuda:eager": "cnnl", "cuda:tf32": "cnnl", "cuda:inductor": "cnml"}
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skips of a machine without a GPU")


@pytest.fixture(scope="module")
def registry() -> BackendRegistry:
    registry = BackendRegistry()
    call_hook(new_plugin_manager(), "mluverify_add_backends", registry=registry)
    return registry


@pytest.mark.parametrize("target, policy", NEW_TARGETS.items())
def test_new_targets_resolve_with_their_policy(registry, target, policy):
    resolved, backend = registry.resolve(target)
    assert str(resolved) == target
    assert backend.policy(resolved.mode) == policy


def test_an_unknown_mode_of_a_torch_device_lists_the_valid_targets(registry):
    with pytest.raises(ValueError, match=r"unknown target 'cpu:eager'.*'cpu:inductor'.*'cuda:tf32'"):
        registry.resolve("cpu:eager")


@no_gpu
@pytest.mark.parametrize("target", ["cuda:eager", "cuda:tf32", "cuda:inductor"])
def test_cuda_targets_say_there_is_no_gpu(registry, target):
    assert registry.resolve(target)[1].unavailable_reason() == "torch.cuda.is_available() is False on this machine"


def test_a_mode_can_be_unavailable_on_its_own(monkeypatch):
    import importlib.util

    from mluverify.plugins.inductor_backend import triton_missing

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "triton" else real_find_spec(name, *args))
    assert triton_missing() == "TorchInductor on cuda generates triton kernels, and triton is not installed"
    backend = TorchDeviceBackend("gpu", "cpu", runners={})
    backend.add_mode("inductor", "cnml", lambda *args: None, requirement=triton_missing)
    backend.add_mode("eager", "cnnl", lambda *args: None)
    assert backend.unavailable_reason() is None
    assert backend.mode_unavailable_reason("inductor").endswith("triton is not installed")
    assert backend.mode_unavailable_reason("eager") is None


def test_cpu_inductor_runs_here_with_the_images_compiler(registry):
    assert registry.resolve("cpu:inductor")[1].unavailable_reason() is None


def test_without_a_cpp_compiler_cpu_inductor_says_so(monkeypatch):
    from torch._inductor import config

    monkeypatch.setattr(config.cpp, "cxx", (None, "/nonexistent/c++"))
    reason = cpp_compiler_missing()
    assert reason.startswith("TorchInductor needs a C++ compiler for the CPU")
    assert "/nonexistent/c++" in reason and "install g++ or set CXX" in reason


@no_gpu
def test_unavailable_targets_are_skips_with_their_reasons(pytester, monkeypatch):
    pytester.makepyfile(test_any="""
        import torch

        def test_add(verify):
            verify(torch.add, torch.ones(3), torch.ones(3), op="add")
    """)
    targets = [arg for target in ("cuda:eager", "cuda:tf32", "cuda:inductor", "cpu:inductor")
               for arg in ("--mlu-target", target)]
    # CXX is read when Inductor's config is imported: a fresh process sees only the missing compiler.
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    result = pytester.runpytest_subprocess("-p", "mluverify", *targets, "-rs", "-p", "no:cacheprovider",
                                           "--mlu-report", str(pytester.path / "run"))
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines([
        "*target cuda:eager unavailable: torch.cuda.is_available() is False on this machine*",
        "*target cuda:tf32 unavailable: torch.cuda.is_available() is False*",
        "*target cuda:inductor unavailable: torch.cuda.is_available() is False*",
        "*target cpu:inductor unavailable: TorchInductor needs a C++ compiler for the CPU*/nonexistent/c++*",
    ])


def test_tf32_switch_is_set_inside_and_restored_after_even_on_error():
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    before = (matmul.fp32_precision, conv.fp32_precision)
    with pytest.raises(RuntimeError, match="inside"):
        with cuda_fp32_precision("tf32"):
            assert (matmul.fp32_precision, conv.fp32_precision) == ("tf32", "tf32")
            raise RuntimeError("inside")
    assert (matmul.fp32_precision, conv.fp32_precision) == before
    with cuda_fp32_precision("ieee"):
        assert (matmul.fp32_precision, conv.fp32_precision) == ("ieee", "ieee")


def test_a_device_computing_in_float64_returns_the_cases_dtype_and_keeps_an_ops_own_dtype():
    backend = TorchDeviceBackend("cpu64", "cpu", compute_dtype="float64")
    case = Case("c", "mul", Target("cpu64", "eager"))
    x = torch.tensor([[1.0, 2.0, 3.0]])
    computed = backend.execute(lambda t: t * 3, (x,), {}, case=case).output
    own = backend.execute(lambda t: (t * 2).half(), (x,), {}, case=case).output
    assert (computed.dtype, computed.tolist()) == (torch.float32, [[3.0, 6.0, 9.0]])
    assert (own.dtype, own.tolist()) == (torch.float16, [[2.0, 4.0, 6.0]])
