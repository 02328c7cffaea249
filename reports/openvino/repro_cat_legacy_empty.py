"""OpenVINO's PyTorch front end cannot convert ``torch.cat`` of torch's legacy empty tensor
(shape ``[0]``) with a 4-d tensor along a negative dimension: ``convert_model`` raises
``OpConversionFailure: ... Axis -2 out of the tensor rank range [-1, 0] ... Conversion is failed
for: SequenceMark, aten.cat.default``. torch skips 1-d empty inputs of ``cat`` (its legacy rule,
pytorch/pytorch#5889), and transformers' ``DynamicCache`` starts each layer's keys and values as
``torch.tensor([])`` and concatenates the first step onto them, so every Hugging Face decoder
and encoder-decoder of the model zoo (suites/zoo, issue 39) fails to convert on openvino:cpu and
openvino:default (``fail_to_run``). TorchInductor had the same gap, pytorch/pytorch#185535.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_cat_legacy_empty.py      # exits 1 while it fails
"""
import torch
from openvino_compiled import check


class CatOntoEmptyCache(torch.nn.Module):
    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        cache = torch.tensor([], dtype=keys.dtype)  # DynamicLayer's first keys
        return torch.cat([cache, keys], dim=-2)


check(CatOntoEmptyCache(), torch.randn(2, 4, 3, 16))
