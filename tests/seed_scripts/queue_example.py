# From the vendor document 003_69f1e2678d4ec586.txt, task scheduling (Queue) example. The document's
# "//" comment lines are written as "#" lines (Python comments) and the imports the snippet
# assumes (torch, torch_mlu) are added before it; every other line is verbatim. Do not edit.
import torch
import torch_mlu
import torch_mlu.core.mlu_model as ct
ct.set_device(0)

# 当前设备0卡使用默认Queue计算
x = torch.randn((64, 128, 24, 24), dtype=torch.float32)
x_mlu = x.to(torch.device('mlu'))
out = torch.abs(x_mlu)
...

# 设定MLU 1卡的Queue进行计算
with torch_mlu.core.mlu_model.Queue(1):
    x = torch.randn((64, 128, 24, 24), dtype=torch.float32)
    x_mlu = x.to(torch.device('mlu'))
    out = torch.abs(x_mlu)
...

# 设定MLU 2卡的Queue进行计算
with torch_mlu.core.mlu_model.Queue(0):
    x = torch.randn((64, 128, 24, 24), dtype=torch.float32)
    x_mlu = x.to(torch.device('mlu'))
    out = torch.abs(x_mlu)
...
