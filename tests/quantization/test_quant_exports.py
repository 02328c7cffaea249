"""The public facade of the quantization package exports exactly its public names."""
from __future__ import annotations

import mluverify.device.quantization as quantization


def test_all_lists_every_public_name():
    # (names that are not identifiers are what pytest's assertion rewriting adds to plugin modules)
    public = {name for name in vars(quantization)
              if name.isidentifier() and not name.startswith("_") and name != "annotations"}
    assert set(quantization.__all__) == public, (set(quantization.__all__) ^ public)
