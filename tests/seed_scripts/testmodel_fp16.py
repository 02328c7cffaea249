# Verbatim from the vendor document 000_baa4ed7010859048.txt, TestModel + float16 flow (only joined and dedented); do not edit.
import torch
import torch.nn as nn
import torch_mlu
import torch_mlu.core.mlu_model as ct
from torch.nn import Parameter
import torch.nn.functional as F
import random
# 执行推理必须设置以下条件：
torch.set_grad_enabled(False)

class TestModel(nn.Module):
    def __init__(self, in_channels):
        super(TestModel, self).__init__()
        out_channels = 16
        conv1 = torch.nn.Conv2d(in_channels, out_channels, \
                                3, 1, 0, 1, 1, bias=False)
        bn1 = torch.nn.BatchNorm2d(out_channels, affine=False)
        relu1 = torch.nn.ReLU(inplace=False)
        self.block1 = torch.nn.Sequential(conv1,
                                          bn1,
                                          relu1)

    def forward(self, x):
        y = self.block1(x)
        z = y + y
        z1 = F.max_pool2d(z, 2, stride=None)
        z2 = torch.transpose(z1, 0, 3)
        return z2

# 初始化模型，并准备网络的输入数据。
in_channels = random.randint(1,10)
input1 = torch.rand(1, in_channels, 224, 224)
model = TestModel(in_channels)
model.eval().float()

traced_model = torch.jit.trace(model, input1, check_trace=False)
# 将权重数据转为float16类型。
traced_model.half().to('mlu')
# 网络的输入数据也需要转为float16类型，并送入模型进行前向计算。
output = traced_model(input1.half().to('mlu'))
