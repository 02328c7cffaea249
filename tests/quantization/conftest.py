"""Quantization tests: this directory is on sys.path (pytest's prepend import mode), so test
modules import the numpy reference as ``quant_reference``."""
