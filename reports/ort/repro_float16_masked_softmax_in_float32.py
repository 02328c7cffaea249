"""A float16 ``softmax(scores + mask)`` of an attention row that the mask hides entirely (every
entry float16's lowest, -65504, as Hugging Face's masks are for a padded query position): torch
rounds each sum to float16, every one is -65504, and the row's attention is uniform (0.25 each
of four); ONNX Runtime's CPU execution provider returns softmax(scores) instead, as if the mask
were not there. Its CPU kernels of Add and Softmax take no float16, so its InsertCastTransformer
runs both in float32 and removes the Cast pair between them: the float16 rounding of the sum that
the graph states is skipped (onnx's own reference evaluator of the same graph gives 0.25 each).
Both exporters, the graph optimizations off too. Rows with one visible entry or more agree.

Found by the zoo in float16 (hf_qwen3 on ort:cpu and ort:dynamo, rel_mse 0.1361; 6.1e-4 over the
unpadded positions, 0.36 over the three left-padded ones; Llama, Qwen2 and Mistral 0.0098-0.0106 there,
under the bound: Qwen3's q / k norms spread its scores wider).

onnxruntime 1.32.0, torch 2.14.1. Upstream: the runtime's design, not a bug there: float16
nodes without a CPU kernel run in float32 between inserted casts (microsoft/onnxruntime#11831:
"CPU operators does not support float16"; #8018 forces neighbouring nodes to float32 to drop the
casts between them); this consequence not found reported.
    .venv/bin/python reports/ort/repro_float16_masked_softmax_in_float32.py      # exits 1 while the deviation is there
"""
import torch
from ort_compiled import check


class MaskedSoftmax(torch.nn.Module):
    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores + mask, dim=-1)


scores = torch.tensor([[0.5, -1.0, 1.5, 2.0]], dtype=torch.float16)
check(MaskedSoftmax(), scores, torch.full_like(scores, torch.finfo(torch.float16).min))
