"""Seed-style op scripts (docs/seed_tests.md); a package so that their file names (test_matmul.py)
may repeat those of suites/ops under pytest."""
