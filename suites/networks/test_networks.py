"""Whole networks in the precisions of the seeds and of today's models (random seeded weights):
the MNIST quickstart ``Net`` (seed 001), the fused chapter's ``TestModel`` (seed 000), an LSTM
model, torchvision ResNet50 and VGG19, a GPT-style decoder, a BERT-style encoder, torchvision
ViT-B/16 and MobileNetV3.

Float32 / float16 on every target, bfloat16 on the targets whose device computes in it
(``BFLOAT16_TARGETS``); int8 weights with float32 activations and int16 weights with float16
activations on the fused target (the seeds' mixed precisions, plus the two they say work the
same way). Image networks run on small inputs by default; full-size inputs and the costly
precisions of the big networks are ``mlu_heavy`` (``--mlu-heavy``).
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import pytest
import torch
import torch.nn as nn
from network_models import BertEncoder, GptDecoder, LstmModel, Net, TestModel, trained_like

SEED = 0
VOCAB = 512  # of the GPT and BERT models
# Targets whose device computes in bfloat16 (the emulated MLU has no bfloat16 kernels).
BFLOAT16_TARGETS = ("cpu:inductor", "cpu64:eager", "cuda:eager", "cuda:tf32", "cuda:inductor")


def _torchvision(name: str, **kwargs) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kwargs)

    return build


class Network(NamedTuple):
    name: str
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    default: tuple[tuple[str, str], ...] | None = None  # precisions in the default selection; None: all
    make_input: Callable[..., torch.Tensor] = torch.rand  # images in [0, 1); sequences get torch.randn


_tokens = functools.partial(torch.randint, 0, VOCAB)
_FLOAT32 = (("float32", ""),)

NETWORKS = (
    Network("mnist_net", Net, (2, 1, 28, 28)),
    Network("test_model", lambda: TestModel(in_channels=3), (1, 3, 224, 224)),
    Network("lstm_model", LstmModel, (2, 12, 32), make_input=torch.randn),
    Network("gpt_decoder", GptDecoder, (2, 16), make_input=_tokens),
    Network("bert_encoder", BertEncoder, (2, 16), make_input=_tokens),
    Network("resnet50_small", _torchvision("resnet50"), (1, 3, 64, 64), default=(*_FLOAT32, ("float32", "int8"))),
    Network("vgg19_small", _torchvision("vgg19"), (1, 3, 32, 32), default=_FLOAT32),
    Network("vit_b_16_small", _torchvision("vit_b_16", image_size=32), (1, 3, 32, 32), default=_FLOAT32),
    Network("mobilenet_v3_large_small", _torchvision("mobilenet_v3_large"), (1, 3, 64, 64), default=_FLOAT32),
    Network("resnet50", _torchvision("resnet50"), (1, 3, 224, 224), default=()),
    Network("vgg19", _torchvision("vgg19"), (1, 3, 224, 224), default=()),
    Network("vit_b_16", _torchvision("vit_b_16"), (1, 3, 224, 224), default=()),
    Network("mobilenet_v3_large", _torchvision("mobilenet_v3_large"), (1, 3, 224, 224), default=()),
)

# (dtype of activations, quantized weights): the seeds' float32, float16, int8_float32,
# int16_float16, and float16_int8 / float32_int16 which they say work the same way.
FLOAT_PRECISIONS = (("float32", ""), ("float16", ""))
QUANT_PRECISIONS = (("float32", "int8"), ("float16", "int16"), ("float16", "int8"), ("float32", "int16"))
BFLOAT16 = (("bfloat16", ""),)


def _params(precisions: tuple[tuple[str, str], ...]) -> list:
    return [pytest.param(net, dtype, quant, id=f"{net.name}-{dtype}{'-' + quant if quant else ''}",
                         marks=[] if net.default is None or (dtype, quant) in net.default else [pytest.mark.mlu_heavy])
            for net in NETWORKS for dtype, quant in precisions]


def model_and_input(net: Network) -> tuple[nn.Module, torch.Tensor]:
    """The network with seeded weights (batch-norm as after training), in eval mode, and a
    seeded input."""
    torch.manual_seed(SEED)
    model = trained_like(net.build()).eval()
    return model, net.make_input(net.input_shape)


def _verify_network(verify, net: Network, dtype: str, quant: str) -> None:
    model, x = model_and_input(net)
    verify(model, x, op=net.name, dtype=dtype, quant=quant, seed=SEED)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")  # the seed's Net applies Dropout2d to 2-D input
@pytest.mark.parametrize("net, dtype, quant", _params(FLOAT_PRECISIONS))
def test_network(verify, net: Network, dtype: str, quant: str) -> None:
    _verify_network(verify, net, dtype, quant)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")
@pytest.mark.mlu_targets(*BFLOAT16_TARGETS)
@pytest.mark.parametrize("net, dtype, quant", _params(BFLOAT16))
def test_bfloat16_network(verify, net: Network, dtype: str, quant: str) -> None:
    _verify_network(verify, net, dtype, quant)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")
@pytest.mark.mlu_targets("mlu:cnml")
@pytest.mark.parametrize("net, dtype, quant", _params(QUANT_PRECISIONS))
def test_quantized_network(verify, net: Network, dtype: str, quant: str) -> None:
    _verify_network(verify, net, dtype, quant)
