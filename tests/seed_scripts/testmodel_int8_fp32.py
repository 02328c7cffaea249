# Verbatim from the vendor document 000_baa4ed7010859048.txt, TestModel + int8/float32 flow (only joined and dedented); do not edit.
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

# 首先，导入量化工具包。
import torch_mlu.core.mlu_quantize as mlu_quantize

# 初始化量化模型，以便在前向时计算输入和权重的量化参数，dtype设置为int8。
qconfig = {'use_ave': False, 'data_scale': 1.0, 'mean': None, 'std': None, 'firstconv': False}
quantized_model = mlu_quantize.quantize_dynamic_mlu(model, qconfig, dtype='int8', gen_quant=True)

# 在cpu上执行前向函数，输入和权重的量化参数会被保存到模型的权重字典：state_dict()中。
example_input = torch.rand(1, in_channels, 224, 224)
_  = quantized_model(example_input)
checkpoint = quantized_model.state_dict()

# 部署并运行量化后的模型。
model_mlu =  mlu_quantize.quantize_dynamic_mlu(model)
# 加载包含量化参数的权重
model_mlu.load_state_dict(checkpoint)
# 注意，这里的model_mlu中的权重算子已被替换为MLU量化权重算子。
# 所以使用jit.trace时需要将输入和权重的设备类型设置为‘mlu’。
traced_model = torch.jit.trace(model_mlu.to('mlu'), input1.to('mlu'), check_trace=False)
output = traced_model(input1.to('mlu'))
