"""Repo-level pytest set-up: hypothesis profiles for the suites and mluverify's own tests.

``ci`` (the default) is deterministic and bounded: 6 examples per test, no shrinking (a failure
is reported as drawn). ``audit`` is the worst-case search (``--hypothesis-profile=audit``): 200
examples per test, random, shrinking on. It searches shapes, value distributions, layouts and
every element's value (``mluverify.strategies``), and ``hypothesis.target`` steers it towards
the largest raw error (``strategies.search_score``: rel_mse without Cambricon's eps rule, which
moves where the judged value is 0). Each test costs about 200 / 6 = 33 times its ``ci`` time,
plus the shrinking of a failure: plan on the order of 30x ``make verify``'s wall time.

Examples must be the same in every run, or the gate would compare different inputs under one
case id. Hypothesis (this release: constraints.txt) also draws constants mined from every
*local* module imported so far (``providers._get_local_constants``); which modules are imported
when a test draws depends on the tests that ran before it in the process (pytest-xdist's
scheduling) and on the project's source itself. The pool of mined constants is kept empty, so a
derandomized example depends only on its test.
"""
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.conjecture import providers

_NO_LOCAL_CONSTANTS = providers.Constants()
providers._get_local_constants = lambda: _NO_LOCAL_CONSTANTS

# verify is function-scoped but stateless between examples, so reusing it is safe.
_SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=6, derandomize=True, deadline=None, database=None,
                          suppress_health_check=_SUPPRESSED,
                          phases=[Phase.explicit, Phase.generate])
settings.register_profile("audit", max_examples=200, deadline=None, suppress_health_check=_SUPPRESSED)
settings.load_profile("ci")
