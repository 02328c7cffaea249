"""The suites' hypothesis examples depend only on their test: importing more local modules
(which pytest-xdist's scheduling decides) must not change what a derandomized test draws."""
import importlib
import sys

from hypothesis import given, settings, strategies as st


def test_importing_a_local_module_does_not_change_derandomized_examples(tmp_path, monkeypatch):
    drawn: list[float] = []

    @given(st.floats(-10, 10))
    @settings(max_examples=30, derandomize=True, database=None)
    def draw(x):
        drawn.append(x)

    draw()
    before = list(drawn)
    # a local module full of constants hypothesis would otherwise mine and mix into its draws
    (tmp_path / "constants_module.py").write_text(
        "VALUES = [" + ", ".join(f"{i}.{i}25" for i in range(1, 10)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("constants_module")
    drawn.clear()
    draw()
    assert drawn == before
    sys.modules.pop("constants_module")
