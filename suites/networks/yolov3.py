"""The seeds' YOLOv3 detection network (``yolov3_offline_multicore``), with random weights, and its
post-processing: decode and NMS.

Seed 003, "检测网络YOLOv3示例":
"yolov3_offline_multicore是检测网络YOLOv3的示例为离线多核示例程序" (yolov3_offline_multicore is
the YOLOv3 example, an offline multi-core program). The network is
YOLOv3 as its paper builds it: a Darknet-53 backbone (a 3x3 stem and five stride-2 stages of
1, 2, 8, 8 and 4 residual blocks, 52 convolutions, each with batch-norm and leaky ReLU 0.1;
Darknet-53's 53rd layer, the classifier, is replaced by the heads), the FPN-style neck (1x1
convolution, nearest 2x upsampling, concatenation with the stage of the next finer stride)
and three detection heads at strides 32, 16 and 8, each predicting 3 anchors x (4 box terms,
objectness, 80 COCO classes). ``width`` scales every channel count (1.0 is the paper's 32 ...
1024); the suite runs ``width=0.25`` on 160 x 160 images so that a case costs a few CPU seconds.

No COCO weights can be downloaded here: the weights are random (seeded). Random weights with
made-up batch-norm statistics lose the image within a few layers (through 75 layers the heads'
outputs vary across images by 1e-6 of their spread: every image gets the same boxes, decided
by the biases and scoring within 1e-3 of each other). So the network is calibrated on the
images, as data-dependent initialization does it (LSUV, Mishkin & Matas 2015; batch-norm
re-estimation): batch-norm affine parameters random as after training, its statistics measured
on the batch, each channel's variance floored at its layer's mean (a batch of 4 images measures
a near-constant channel's variance as almost 0, and normalizing by it would multiply that
channel's rounding errors: measured, the heads' rel_mse on MLU370 is 3.9 % without the floor,
0.6 % with it), and each head's last convolution scaled so that its output has std
``HEAD_LOGIT_STD``, its bias zero (``calibrated``). The scores then depend on the image. The
post-processing keeps a fixed number of boxes per image by rank (``TOP_K`` after class-wise
NMS) rather than by a score threshold, which random weights give no meaning. Images are
scikit-image's bundled samples (``skimage.data``: no download).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from network_models import trained_like

SEED = 0
CLASSES = 80  # COCO, as the demo's label_map_coco.txt
IMAGE_SIZE = 160
IMAGES = ("astronaut", "coffee", "chelsea", "rocket")  # skimage.data samples shipped in the package
# The paper's COCO anchors (pixels at 416 x 416), three per head, in the heads' order (strides 32, 16, 8).
ANCHORS_416 = (((116, 90), (156, 198), (373, 326)), ((30, 61), (62, 45), (59, 119)), ((10, 13), (16, 30), (33, 23)))
NMS_IOU = 0.45  # the demo's and the paper's NMS threshold
TOP_K = 30  # detections kept per image (by score, after NMS): 120 for the gate on 4 images
HEAD_LOGIT_STD = 2.0  # of the calibrated heads' outputs: sigmoid scores spread over (0.1, 0.9)
BLOCKS = (1, 2, 8, 8, 4)  # residual blocks per Darknet-53 stage


def conv(c_in: int, c_out: int, kernel: int, stride: int = 1) -> nn.Sequential:
    """Darknet's convolutional layer: convolution without bias, batch-norm, leaky ReLU 0.1."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm2d(c_out), nn.LeakyReLU(0.1))


class Residual(nn.Module):
    """Darknet-53's residual block: 1x1 to half the channels, 3x3 back, added to the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv(channels, channels // 2, 1), conv(channels // 2, channels, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Darknet53(nn.Module):
    """The backbone; returns the outputs of the last three stages (strides 8, 16, 32)."""

    def __init__(self, width: float) -> None:
        super().__init__()
        channels = [max(8, int(c * width)) for c in (32, 64, 128, 256, 512, 1024)]
        self.stem = conv(3, channels[0], 3)
        self.stages = nn.ModuleList(
            nn.Sequential(conv(c_in, c_out, 3, 2), *(Residual(c_out) for _ in range(blocks)))
            for c_in, c_out, blocks in zip(channels, channels[1:], BLOCKS))
        self.channels = channels[-3:]

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        outputs = []
        for stage in self.stages:
            x = stage(x)
            outputs.append(x)
        return outputs[-3:]


def _neck(c_in: int, c_mid: int) -> nn.Sequential:
    """The five alternating 1x1 / 3x3 layers before each head."""
    return nn.Sequential(conv(c_in, c_mid, 1), conv(c_mid, 2 * c_mid, 3), conv(2 * c_mid, c_mid, 1),
                         conv(c_mid, 2 * c_mid, 3), conv(2 * c_mid, c_mid, 1))


class YoloV3(nn.Module):
    """YOLOv3: Darknet-53, the upsampling neck and three heads; returns the raw head outputs
    ``(N, 3 * (5 + classes), H / s, W / s)`` for strides ``s`` = 32, 16, 8."""

    def __init__(self, width: float = 1.0, classes: int = CLASSES) -> None:
        super().__init__()
        self.backbone = Darknet53(width)
        c8, c16, c32 = self.backbone.channels
        outputs = 3 * (5 + classes)
        self.necks = nn.ModuleList([_neck(c32, c32 // 2), _neck(c16 + c16 // 2, c16 // 2),
                                    _neck(c8 + c8 // 2, c8 // 2)])
        self.heads = nn.ModuleList(nn.Sequential(conv(c // 2, c, 3), nn.Conv2d(c, outputs, 1))
                                   for c in (c32, c16, c8))
        self.lateral = nn.ModuleList([conv(c32 // 2, c16 // 2, 1), conv(c16 // 2, c8 // 2, 1)])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        finer = self.backbone(x)[::-1]  # strides 32, 16, 8
        outputs, routed = [], None
        for level, features in enumerate(finer):
            if routed is not None:
                lateral = self.lateral[level - 1](routed)
                features = torch.cat([F.interpolate(lateral, scale_factor=2.0, mode="nearest"), features], 1)
            routed = self.necks[level](features)
            outputs.append(self.heads[level](routed))
        return tuple(outputs)


def calibrated(model: YoloV3, images: torch.Tensor) -> YoloV3:
    """``model`` (in eval mode) with batch-norm statistics measured on ``images`` and each head's
    last convolution scaled so that its output on them has std ``HEAD_LOGIT_STD`` around a zero
    bias (see the module docstring)."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch gives its own statistics
    with torch.no_grad():
        model.train()(images)
        for norm in norms:  # a few images measure small variances poorly: none below the layer's mean
            norm.running_var.clamp_(min=float(norm.running_var.mean()))
        for head, output in zip(model.heads, model.eval()(images)):
            last = head[-1]
            last.weight.mul_(HEAD_LOGIT_STD / (output - last.bias[:, None, None]).std())
            last.bias.zero_()
    for norm, momentum in zip(norms, momenta):
        norm.momentum = momentum
    return model


def yolov3(images: torch.Tensor, width: float = 0.25) -> YoloV3:
    """The suite's YOLOv3 for ``images``: seeded random weights, batch-norm affine parameters as
    after training, calibrated on ``images``; in eval mode."""
    torch.manual_seed(SEED)
    return calibrated(trained_like(YoloV3(width)), images)


def sample_images(names: tuple[str, ...] = IMAGES, size: int = IMAGE_SIZE) -> torch.Tensor:
    """scikit-image's bundled sample images as an RGB batch ``(N, 3, size, size)`` in [0, 1]
    (resized with antialiasing, as the demo's pre-processing resizes to the network input)."""
    from skimage import data

    batch = [torch.from_numpy(getattr(data, name)()[..., :3].copy()).permute(2, 0, 1) for name in names]
    resized = [F.interpolate(image[None].float(), (size, size), mode="bilinear", antialias=True) for image in batch]
    return (torch.cat(resized) / 255.0).clamp_(0.0, 1.0)


class Detections(NamedTuple):
    """One image's detections: boxes ``(K, 4)`` as x1, y1, x2, y2 pixels, scores and class labels."""

    boxes: torch.Tensor
    scores: torch.Tensor
    labels: torch.Tensor


def decode(outputs: tuple[torch.Tensor, ...], image_size: int = IMAGE_SIZE) -> torch.Tensor:
    """The boxes of every anchor of every head, ``(N, A, 5 + classes)``: x1, y1, x2, y2 in
    pixels (centre ``(sigmoid(t_xy) + cell) * stride``, size ``exp(t_wh) * anchor``, anchors
    scaled from 416 to ``image_size``), then objectness and class probabilities (sigmoid)."""
    decoded = []
    for raw, anchors in zip(outputs, ANCHORS_416):
        raw = raw.float()
        n, _, h, w = raw.shape
        stride = image_size / h
        t = raw.view(n, len(anchors), -1, h, w).permute(0, 1, 3, 4, 2)  # (N, 3, H, W, 5 + classes)
        rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        cells = torch.stack([cols, rows], -1).to(t)
        sizes = torch.tensor(anchors, dtype=t.dtype).view(1, -1, 1, 1, 2) * (image_size / 416)
        centre = (t[..., :2].sigmoid() + cells) * stride
        half = t[..., 2:4].clamp(max=8.0).exp() * sizes / 2  # clamped: random weights may overflow exp
        boxes = torch.cat([centre - half, centre + half], -1).clamp(0, image_size)
        decoded.append(torch.cat([boxes, t[..., 4:].sigmoid()], -1).reshape(n, -1, t.shape[-1]))
    return torch.cat(decoded, 1)


def detect(outputs: tuple[torch.Tensor, ...], image_size: int = IMAGE_SIZE, top_k: int = TOP_K) -> list[Detections]:
    """Decode, score each box by objectness x its best class probability, class-wise NMS
    (``torchvision.ops.batched_nms`` at IoU ``NMS_IOU``), keep the ``top_k`` best per image."""
    from torchvision.ops import batched_nms

    found = []
    for boxes in decode(outputs, image_size):
        scores, labels = (boxes[:, 4:5] * boxes[:, 5:]).max(1)
        keep = batched_nms(boxes[:, :4], scores, labels, NMS_IOU)[:top_k]  # sorted by score
        found.append(Detections(boxes[keep, :4], scores[keep], labels[keep]))
    return found
