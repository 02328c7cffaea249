"""TorchInductor (CPU) computes a float16 ``softmax(scores + mask)`` of an attention row that the
mask hides entirely (every entry float16's lowest, -65504, as Hugging Face's masks are for a
padded query position) as softmax(scores): it keeps the fused add in float32 and never rounds
the sum to float16, where eager rounds every sum to -65504 and the row's attention is uniform
(0.25 each of four). ONNX Runtime's CPU provider does the same (reports/ort/
repro_float16_masked_softmax_in_float32.py): a deviation two real compilers share. The zoo's
Qwen3 in float16 fails by it on cpu:inductor, ort:cpu and ort:dynamo alike (rel_mse 0.136, all
of it at the left-padded positions). ``TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1`` (Inductor's
eager-numerics mode) gives eager's result.

torch 2.14.1 only. Upstream: Inductor's documented default, not a bug there: it elides float16
downcast-upcast pairs across fused pointwise ops (pytorch/pytorch#183761, closed as intended;
``torch._inductor.config.emulate_precision_casts``); this consequence not found reported.
    .venv/bin/python reports/inductor/repro_float16_masked_softmax.py      # exits 1 while it holds
"""
import torch


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores + mask, dim=-1)


scores = torch.tensor([[0.5, -1.0, 1.5, 2.0]], dtype=torch.float16)
mask = torch.full_like(scores, torch.finfo(torch.float16).min)
eager = masked_softmax(scores, mask)
compiled = torch.compile(masked_softmax, backend="inductor", dynamic=False)(scores, mask)
print(f"eager:    {eager.tolist()}\ncompiled: {compiled.tolist()}")
assert torch.equal(eager, compiled), "Inductor's float16 masked softmax differs from eager's"
