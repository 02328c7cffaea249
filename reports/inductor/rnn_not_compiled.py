"""TorchDynamo does not compile nn.LSTM / nn.GRU / nn.RNN: torch.compile(backend="inductor") runs
them eagerly (its config allow_rnn is False by default), so a cpu:inductor case of a recurrent
model executes layer by layer (status not_fused).

    .venv/bin/python reports/inductor/rnn_not_compiled.py

prints, for each layer, the graphs compiled (0) and why ("Attempted to wrap RNN, GRU, or LSTM").
"""
import torch
from torch._dynamo.utils import counters

for layer in (torch.nn.LSTM(32, 64, num_layers=2, batch_first=True), torch.nn.GRU(32, 64), torch.nn.RNN(32, 64)):
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        torch.compile(layer.eval(), backend="inductor")(torch.randn(2, 12, 32))
    reasons = [reason.splitlines()[0] for reason in counters["unimplemented"]]
    print(f"{type(layer).__name__}: graphs compiled {counters['stats']['unique_graphs']}, not compiled because {reasons}")
