# Verbatim from the vendor document 000_baa4ed7010859048.txt, weight-op (conv) JIT inference (only dedented); do not edit.
import torch
import torch_mlu
import torch.nn as nn
import torch_mlu.core.mlu_model as ct

# 默认为使能。如果没有更改过，略去以下语句。
ct._jit_override_can_fuse_on_mlu(True)
# 执行推理必须设置以下条件：
torch.set_grad_enabled(False)

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv = nn.Conv2d(1, 1, 3)

    def forward(self, x):
        return self.conv(x)

n = Net().eval().float()
example_forward_input = torch.rand(1, 1, 3, 3)

module = torch.jit.trace(n, example_forward_input)
input = torch.randn((1,1,28,28), dtype=torch.float)
input_mlu = input.to("mlu")
module.to("mlu")
out_mlu = module(input_mlu)
out_cpu = out_mlu.cpu()
