"""The model zoo's case source: the timm models of PyTorch's timm list (``timm_models_list.txt``,
shipped beside this file) and the Hugging Face architectures of ``zoo_hf``, each a ``ZooModel``
with its name, family and input kind, built with seeded random weights (never downloaded) and
given seeded inputs of its own kind.

Nothing here imports timm or transformers until a model is built: collecting the zoo costs a
file read. ``find_models`` turns user-given names into models, naming close matches for an
unknown one.
"""
from __future__ import annotations

import copy
import difflib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn as nn
from .zoo_hf import (AUDIO, AUDIO_SAMPLES, DECODER, ENC_DEC, FEATURES, HF_ARCHITECTURES, IMAGE, IMAGES, MEL_BINS,
                    MEL_FRAMES, SEQUENCE, TOKENS, VOCAB, WAVEFORM, HfArchitecture, build_hf)

SEED = 0
TIMM_LIST = Path(__file__).with_name("timm_models_list.txt")
TIMM = "timm"
INSTALL = "pip install 'mluverify[zoo]'"
TIMM_SIDE = 64  # the images' side, where the model takes it (``img_size``) or runs at it
# The smallest side these run at (inception's stem needs 75 pixels; halo attention 8x8 blocks
# in each of five halvings).
TIMM_SIDES = {"adv_inception_v3": 96, "gluon_inception_v3": 96, "inception_v3": 96, "eca_halonext26ts": 256}
# Depth reduced through timm's own config override (``depth=``), for the deepest transformers:
# the architecture stays, the number of identical blocks shrinks.
TIMM_OVERRIDES = {"cait_m36_384": {"depth": 2}, "xcit_large_24_p8_224": {"depth": 2}}
# The models also given a training step (loss and gradients): token models (an encoder, two
# decoders, an encoder-decoder; their ids bound as buffers, so only parameters' gradients are
# judged, tied embeddings included), CNNs, vision transformers and an audio encoder.
TRAINED = ("hf_bert", "hf_gpt2", "hf_llama", "hf_t5", "mobilenetv2_100", "mnasnet_100", "deit_tiny_patch16_224.fb_in1k",
           "hf_vit", "hf_resnet", "hf_convnext", "hf_wav2vec2")


@dataclass(frozen=True)
class ZooModel:
    """One model of the zoo: ``build()`` makes it (an ``nn.Module`` returning a tuple of
    tensors), ``inputs()`` its seeded inputs."""

    name: str
    family: str
    input_kind: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]

    @property
    def trained(self) -> bool:
        """Whether the zoo also runs a training step of this model."""
        return self.name in TRAINED


class Outputs(nn.Module):
    """A model whose call returns a tuple of tensors: ``run(model, *inputs)`` picks them from
    the model's own output (a timm tensor, a Hugging Face ``ModelOutput``)."""

    def __init__(self, model: nn.Module, run: Callable[..., tuple[torch.Tensor, ...]]) -> None:
        super().__init__()
        self.model = model
        self.run = run

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.run(self.model, *inputs)


def timm_names(path: Path = TIMM_LIST) -> list[str]:
    """The model names of a timm list file (``name batch_size`` lines, ``#`` comments)."""
    lines = (line.split("#")[0].split() for line in path.read_text(encoding="utf-8").splitlines())
    return [fields[0] for fields in lines if fields]


def _build_timm(name: str) -> nn.Module:
    import timm

    overrides = TIMM_OVERRIDES.get(name, {})
    try:  # the image size, for the models whose size is part of the architecture
        model = timm.create_model(name, pretrained=False, img_size=TIMM_SIDES.get(name, TIMM_SIDE), **overrides)
    except TypeError:  # the model takes any size (a CNN): its constructor has no img_size
        model = timm.create_model(name, pretrained=False, **overrides)
    _live_classifier(model)
    return Outputs(model, lambda model, images: (model(images),))


def _live_classifier(model: nn.Module) -> None:
    """Give a zero-initialized classifier random weights: timm starts the MLP-Mixer family's
    (Mixer, gMixer, gMLP, ResMLP) at 0 for fine-tuning, so their logits are 0 for any input and
    every comparison would judge nothing. Drawn as timm draws its other linear weights."""
    head = model.get_classifier()
    if isinstance(head, nn.Linear) and not head.weight.any():
        nn.init.trunc_normal_(head.weight, std=0.02)


def _images(side: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.rand(2, 3, side, side, generator=generator),)


def _timm_model(name: str) -> ZooModel:
    side = TIMM_SIDES.get(name, TIMM_SIDE)
    return ZooModel(name, TIMM, IMAGES, functools.partial(_build_timm, name),
                    functools.partial(_seeded, _images, side))


def _seeded(make: Callable[..., tuple[torch.Tensor, ...]], *args: Any) -> tuple[torch.Tensor, ...]:
    return make(*args, torch.Generator().manual_seed(SEED))


def _tokens(padding: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Two sequences of token ids (3 and up: 0-2 are the special tokens) and their attention
    mask, the second sequence padded by three positions on the ``padding`` side."""
    ids = torch.randint(3, VOCAB, (2, SEQUENCE), generator=generator)
    mask = torch.ones(2, SEQUENCE, dtype=torch.long)
    mask[1, -3:] = 0
    return ids, mask if padding == "right" else mask.flip(-1)


def _hf_inputs(architecture: HfArchitecture, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    if architecture.input_kind == IMAGES:
        return _images(IMAGE if architecture.model_class != "LevitForImageClassification" else 64, generator)
    if architecture.input_kind == WAVEFORM:
        return (0.1 * torch.randn(2, AUDIO_SAMPLES, generator=generator),)
    if architecture.input_kind == FEATURES:
        shape = (2, MEL_BINS, MEL_FRAMES) if architecture.model_class.startswith("Whisper") else (2, MEL_FRAMES, MEL_BINS)
        return torch.randn(*shape, generator=generator), torch.randint(3, VOCAB, (2, 5), generator=generator)
    ids, mask = _tokens("left" if architecture.family == DECODER else "right", generator)
    if architecture.family == ENC_DEC:
        return ids, mask, torch.randint(3, VOCAB, (2, 5), generator=generator)
    return ids, mask


def _logits(output: Any) -> torch.Tensor:
    return output.logits


def _encoder(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_logits(model(input_ids=ids, attention_mask=mask)),)


def _decoder(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The prompt (all but the last token) under its causal mask, then the last token as one
    generation step through the prompt's KV cache: both steps' logits."""
    prompt = model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], use_cache=True)
    step = model(input_ids=ids[:, -1:], attention_mask=mask, past_key_values=prompt.past_key_values, use_cache=True)
    return _logits(prompt), _logits(step)


def _encoder_decoder(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor,
                     decoder_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_logits(model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)),)


def _vision(model: nn.Module, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_logits(model(pixel_values=images)),)


def _waveform(model: nn.Module, audio: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_logits(model(input_values=audio)),)


def _features(model: nn.Module, features: torch.Tensor, decoder_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_logits(model(input_features=features, decoder_input_ids=decoder_ids)),)


_RUNS = {(TOKENS, DECODER): _decoder, (TOKENS, ENC_DEC): _encoder_decoder, (IMAGES, None): _vision,
         (WAVEFORM, None): _waveform, (FEATURES, None): _features}


def _build_hf_model(architecture: HfArchitecture) -> nn.Module:
    run = _RUNS.get((architecture.input_kind, architecture.family if architecture.input_kind == TOKENS else None),
                    _encoder)
    return Outputs(build_hf(architecture), run)


def _hf_model(name: str, architecture: HfArchitecture) -> ZooModel:
    return ZooModel(name, architecture.family, architecture.input_kind,
                    functools.partial(_build_hf_model, architecture), functools.partial(_seeded, _hf_inputs, architecture))


def zoo_models() -> dict[str, ZooModel]:
    """Every model of the zoo by name: the timm list's, then the Hugging Face architectures."""
    models = {name: _timm_model(name) for name in timm_names()}
    models.update((name, _hf_model(name, architecture)) for name, architecture in HF_ARCHITECTURES.items())
    return models


def find_models(names: list[str], models: dict[str, ZooModel] | None = None) -> list[ZooModel]:
    """The models ``names`` asks for; a ValueError names an unknown one and its close matches."""
    models = zoo_models() if models is None else models
    unknown = [name for name in names if name not in models]
    if unknown:
        hints = "; ".join(f"{name!r}: did you mean {', '.join(difflib.get_close_matches(name, models, n=3)) or 'none close'}?"
                          for name in unknown)
        raise ValueError(f"unknown zoo model(s): {hints} ({len(models)} models: see suites/zoo/timm_models_list.txt "
                         f"and suites/zoo/zoo_hf.py)")
    return [models[name] for name in names]


def eager(model: ZooModel) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model with its seeded weights, in eval mode, and its seeded inputs."""
    torch.manual_seed(SEED)
    return model.build().eval(), model.inputs()


def in_float16(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A float16 copy of ``model`` and its floating inputs in float16 (token ids and masks kept)."""
    return copy.deepcopy(model).half(), tuple(x.half() if x.is_floating_point() else x for x in inputs)
