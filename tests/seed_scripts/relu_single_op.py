# Verbatim from the vendor document 000_baa4ed7010859048.txt, non-weight-op (ReLU) JIT inference; do not edit.
import torch
import torch_mlu
torch.set_grad_enabled(False)
input = torch.randn(4,10,dtype=torch.float)
relu = torch.nn.ReLU().float().eval()
module = torch.jit.trace(relu, input)
relu_mlu = module.to("mlu")
out_mlu = relu_mlu(input.to("mlu"))
out_cpu = out_mlu.cpu()
