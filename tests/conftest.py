"""Test-suite settings. With COST4D_REQUIRE_TORCH=1 (set by .ci/run) a skipped test fails the run,
so the PyTorch cross-checks cannot silently drop out of CI."""

import os

import pytest


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("COST4D_REQUIRE_TORCH") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.write_line(f"COST4D_REQUIRE_TORCH=1: {len(skipped)} test(s) were skipped; CI requires all to run",
                            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
