"""NNCF's ``quantize`` of a BERT converted by OpenVINO raises ``KeyError: '<n>
embedding_1/aten.embedding.default/Gather'`` under its default model type: the token-type
embedding (a ``Gather`` whose indices are the model's zero buffer, a constant) is among the
"weights as outputs" ops its quantizer propagation handles, yet no weight quantizer was made for
it (``_handle_output_quantizers_for_weights_as_outputs_ops``). ``model_type=nncf.ModelType.TRANSFORMER``
quantizes the same model. Every BERT-like encoder of the zoo on ``openvino:int8`` (BERT, ALBERT,
ELECTRA, MPNet); a lone embedding indexed by a constant buffer, with LayerNorm and a Linear after
it, quantizes: the trigger is in the rest of BERT's graph (not reduced further).

openvino 2026.4, nncf 3.x (``mluverify[openvino-int8]``), transformers, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_nncf_embedding_keyerror.py      # exits 1 while it holds
"""
import nncf
import openvino
import torch
import transformers

config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64)
torch.manual_seed(0)
bert = transformers.BertModel(config).eval()
ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(0))
model = openvino.convert_model(torch.export.export(bert, (ids,)).run_decompositions())
dataset = nncf.Dataset([ids.numpy()])
nncf.quantize(model, dataset, subset_size=1, model_type=nncf.ModelType.TRANSFORMER)  # quantizes
try:
    nncf.quantize(model, dataset, subset_size=1)
except KeyError as exc:
    print(f"nncf.quantize (default model type): KeyError {exc}; with ModelType.TRANSFORMER it quantizes")
    raise SystemExit(1)
print("quantized under the default model type too: fixed")
