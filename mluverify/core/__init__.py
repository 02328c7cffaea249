"""The core: cases, back ends, configuration, expectations, statuses, provenance, records, the
verification pipeline (outputs and gradients), the hook specifications and the plugin manager a
front end builds per run.

It imports neither torch nor pytest: a case's callable brings torch with it when it runs. Above
it sit the report (records in, pages out), the built-in plugins and the front ends
(``mluverify.pytest_plugin``, ``mluverify.cli``); beside it, as leaves that import nothing above
the judge, the emulated device (``mluverify.device``) and the Dumper (``mluverify.dump``).
"""
