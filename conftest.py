"""Repo-level pytest set-up: hypothesis profiles for the suites and mluverify's own tests.

``ci`` (the default) is deterministic and bounded; ``audit`` draws many examples and lets
``hypothesis.target`` steer towards the worst judged metric. Choose with
``--hypothesis-profile=audit``.
"""
from hypothesis import HealthCheck, Phase, settings

# verify is function-scoped but stateless between examples, so reusing it is safe.
_SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=6, derandomize=True, deadline=None, database=None,
                          suppress_health_check=_SUPPRESSED,
                          phases=[Phase.explicit, Phase.generate])
settings.register_profile("audit", max_examples=200, deadline=None, suppress_health_check=_SUPPRESSED)
settings.load_profile("ci")
