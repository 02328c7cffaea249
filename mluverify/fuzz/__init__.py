"""Random-graph differential testing: programs of 2-16 ops drawn by hypothesis, run on targets,
judged against the CPU and a float64 run, findings shrunk and kept as a corpus.

- ``ops``: the op registry (each op a torch expression and how its arguments are drawn);
- ``program``: programs as data (versioned JSON) and the Python they stand for;
- ``generate``: hypothesis strategies, valid by construction (meta tensors), finite on the CPU;
- ``differential``: one program judged on one target (``mluverify.compare``, golden blame);
- ``isolation``: targets in a child process, so a crash or a hang (a time limit) is a finding;
- ``coverage``: what campaigns judged per target, op and dtype, and the steering of draws
  towards the least judged;
- ``reduce``: graph passes after hypothesis's shrinking;
- ``corpus``: findings (signed by their culprit op or op sequence), their file format,
  deduplication, merging, fixed findings retired to ``fixed/``, standalone scripts;
- ``campaign``: searches by seed and target within a budget.

The package knows no back end: a runner (``mluverify.cli.fuzz.TargetRunner``) connects it to
the plugins' back ends. See docs/fuzzing.md.
"""
