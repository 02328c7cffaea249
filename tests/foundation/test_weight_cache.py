"""One device buffer cache for every prepared weight (TF32-rounded, quantized): counted by
memory_reserved() and freed by empty_cache()."""
import torch

from mluverify.device import mlu_model
from mluverify.device.quantization import quantize_for_target


def test_quantized_weights_are_counted_and_freed_by_the_memory_api():
    torch.manual_seed(0)
    layer = quantize_for_target(torch.nn.Linear(256, 128), [torch.randn(4, 256)], dtype="int8").to("mlu")
    x = torch.randn(4, 256).to("mlu")
    mlu_model.empty_cache()
    cached_before = mlu_model.memory_reserved() - mlu_model.memory_allocated()
    with torch.no_grad():
        layer(x)
        layer(x)  # the second forward reuses the cached copy
    # one quantized copy of the 128 x 256 weight, held as float32 integers: 128 * 256 * 4 bytes
    assert mlu_model.memory_reserved() - mlu_model.memory_allocated() - cached_before == 128 * 256 * 4
    mlu_model.empty_cache()
    assert mlu_model.memory_reserved() == mlu_model.memory_allocated()
