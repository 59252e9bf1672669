"""Test-suite settings. With COST4D_REQUIRE_TORCH=1 (set by .ci/run) a skipped test fails the run,
so the PyTorch cross-checks cannot silently drop out of CI. The parsed-file cache (costmodel.inputs.cache)
lives in a folder of the test session's own, not the user's ~/.cache."""

import os
import tempfile

import pytest


def pytest_configure(config):
    if "COST4D_CACHE_DIR" not in os.environ:  # the commands tests run in subprocesses inherit it
        os.environ["COST4D_CACHE_DIR"] = tempfile.mkdtemp(prefix="cost4d-test-cache-")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("COST4D_REQUIRE_TORCH") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.write_line(f"COST4D_REQUIRE_TORCH=1: {len(skipped)} test(s) were skipped; CI requires all to run",
                            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
