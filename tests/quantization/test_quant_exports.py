"""The public facade of the quantization package exports exactly its public names."""
from __future__ import annotations

import types

import mluverify.device.quantization as quantization


def test_all_lists_every_public_name():
    # (names that are not identifiers are what pytest's assertion rewriting adds to plugin modules;
    # a submodule such as default_mappings becomes an attribute once anything imports it)
    public = {name for name, value in vars(quantization).items()
              if name.isidentifier() and not name.startswith("_") and name != "annotations"
              and not isinstance(value, types.ModuleType)}
    assert set(quantization.__all__) == public, (set(quantization.__all__) ^ public)
