"""The channel order of an offline model's image input (the seeds' ``input_format``).

Seeds 001 / 003: ``ct.set_input_format(args.input_format)  # 设置输入图片的通道顺序，以决定首层卷积对三
通道输入的补齐通道顺序。默认是RGBA顺序。`` (sets the channel order of the input images, which decides
where the first convolution pads a three-channel input; RGBA by default), and for offline
models "使用genoff.py脚本设置 batch_size 、 core_number 和 input_format 参数" (genoff.py sets them when
the model is generated). The YOLOv3 demo's ``-input_format``: "0表示...RGB；1表示...RGBA；2表示...ARGB".

So a model saved for RGBA or ARGB takes four-channel images: the convolution the image reaches
first gets a fourth input channel, with zero weights, where the alpha channel sits (last for
RGBA, first for ARGB). A zero weight adds nothing, so the model computes what it computes on
the RGB image, except where the device's arithmetic sees the alpha values (MLU270 quantizes
the convolution's whole input, alpha included).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from mluverify.device.fusion.errors import OfflineModelError

RGB = 0
ALPHA_CHANNEL = {1: 3, 2: 0}  # input format -> where its alpha channel sits (RGBA: last, ARGB: first)


def to_input_format(images: torch.Tensor, input_format: int, alpha: float = 1.0) -> torch.Tensor:
    """RGB images ``(N, 3, H, W)`` in the channel order ``input_format`` (0 RGB: unchanged, 1
    RGBA, 2 ARGB) with a constant ``alpha`` channel: the demo's pre-processing by
    ``-input_format`` ("依据该参数对输入图片进行相应的前处理")."""
    _check_images(images, input_format)
    if input_format == RGB:
        return images
    opaque = torch.full_like(images[:, :1], alpha)
    return torch.cat([images, opaque] if ALPHA_CHANNEL[input_format] else [opaque, images], 1)


def with_input_format(model: nn.Module, images: torch.Tensor, input_format: int) -> nn.Module:
    """A copy of ``model`` taking ``images`` (RGB, ``(N, 3, H, W)``) in the channel order
    ``input_format``: the ``nn.Conv2d`` that receives the images themselves (found by running
    ``model`` on them) gets a zero-weight alpha channel; RGB returns ``model`` itself.

    :raises OfflineModelError: naming the model when no ``nn.Conv2d`` receives the image input
        unchanged (the alpha channel would reach other ops).
    """
    _check_images(images, input_format)
    if input_format == RGB:
        return model
    first = _first_convolution(model, images)
    if first is None:
        raise OfflineModelError(
            f"input format {_name(input_format)} pads the first convolution of a model for the alpha channel, but "
            f"no nn.Conv2d of {type(model).__name__} takes the image input {list(images.shape)} as it is: "
            f"save it with input_format=0 (RGB)")
    padded = copy.deepcopy(model)
    conv = padded.get_submodule(first)
    weight = conv.weight.detach()
    alpha = torch.zeros_like(weight[:, :1])
    wide = torch.cat([weight, alpha] if ALPHA_CHANNEL[input_format] else [alpha, weight], 1)
    conv.weight = nn.Parameter(wide, requires_grad=conv.weight.requires_grad)
    conv.in_channels = 4
    return padded


def _first_convolution(model: nn.Module, images: torch.Tensor) -> str | None:
    """The name of the first ``nn.Conv2d`` (ungrouped, 3 input channels) called on ``images``
    themselves when ``model`` runs on them, or None."""
    names = {module: name for name, module in model.named_modules()}
    seen: list[str] = []

    def note(module: nn.Module, inputs: tuple) -> None:
        if inputs and inputs[0] is images and module.groups == 1 and module.in_channels == 3:
            seen.append(names[module])

    hooks = [m.register_forward_pre_hook(note) for m in model.modules() if isinstance(m, nn.Conv2d)]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for hook in hooks:
            hook.remove()
    return seen[0] if seen else None


def _check_images(images: object, input_format: int) -> None:
    from mluverify.device.mlu_model import check_input_format

    check_input_format(input_format)
    if not (isinstance(images, torch.Tensor) and images.dim() == 4 and images.shape[1] == 3
            and images.is_floating_point()):
        got = f"{images.dtype} {list(images.shape)}" if isinstance(images, torch.Tensor) else type(images).__name__
        raise OfflineModelError(f"input format {_name(input_format)} takes RGB image batches (N, 3, H, W) of a "
                                f"floating dtype, got {got}")


def _name(input_format: int) -> str:
    from mluverify.device.mlu_model import INPUT_FORMATS

    return f"{INPUT_FORMATS[input_format]} ({input_format})"
