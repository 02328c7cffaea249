"""The small model of the capture tests, and what capturing two of its forwards must give.

conv(3->4) -> relu -> conv(4->4) -> relu -> conv(4->4) -> relu -> flatten -> linear(256->10) on
one 8x8 image. Its aten ops follow from PyTorch's decompositions: ``conv2d`` is
``aten::convolution``, ``relu`` ``aten::relu``, ``flatten`` of a contiguous tensor
``aten::view``, ``linear`` ``aten::t`` of the weight then ``aten::addmm``. The two 4->4
convolutions have the same argument shapes, and so do the three relus.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# (op, count over two forwards, tensor arguments as (dtype, shape, stride)), first-seen order.
EXPECTED = [
    ("aten::convolution", 2, [("float32", [1, 3, 8, 8], [192, 64, 8, 1]),
                              ("float32", [4, 3, 3, 3], [27, 9, 3, 1]), ("float32", [4], [1])]),
    ("aten::relu", 6, [("float32", [1, 4, 8, 8], [256, 64, 8, 1])]),
    ("aten::convolution", 4, [("float32", [1, 4, 8, 8], [256, 64, 8, 1]),
                              ("float32", [4, 4, 3, 3], [36, 9, 3, 1]), ("float32", [4], [1])]),
    ("aten::view", 2, [("float32", [1, 4, 8, 8], [256, 64, 8, 1])]),
    ("aten::t", 2, [("float32", [10, 256], [256, 1])]),
    ("aten::addmm", 2, [("float32", [10], [1]), ("float32", [1, 256], [256, 1]),
                        ("float32", [256, 10], [1, 256])]),
]
FORWARD_LINE = "        return self.head(x.flatten(1))"


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1),
                                    nn.Conv2d(4, 4, 3, padding=1)])
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        for conv in self.convs:
            x = F.relu(conv(x))
        return self.head(x.flatten(1))


def small_net():
    torch.manual_seed(0)
    return SmallNet().eval(), torch.randn(1, 3, 8, 8)
