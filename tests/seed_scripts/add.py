# Verbatim from the vendor document 003_69f1e2678d4ec586.txt, the add example; do not edit.
import torch
import torch_mlu.core.mlu_model as ct
a = torch.rand((1,3,224,224), dtype=torch.float)
b = torch.rand((1,3,224,224), dtype=torch.float)
out_mlu = a.to(ct.mlu_device()) + b.to(ct.mlu_device())
out_cpu = out_mlu.cpu()
