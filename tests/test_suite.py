"""The suite's own set-up: under the README's command (``pytest -n 2 --dist loadgroup``) the tests of
an xdist group run in one worker, which then compiles the kernels they share once (conftest's
``EVERY_MODEL``).  pytest-xdist tells the scheduler a test's group by appending ``@group`` to its
node id; with pytest 9.2 the id no longer changes and the groups are silently spread over the
workers (pyproject.toml pins pytest below it)."""

from __future__ import annotations

import pytest


def test_grouped_tests_carry_their_group_to_the_scheduler(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    grouped = [item for item in request.session.items if any(item.iter_markers("xdist_group"))]
    assert grouped
    lost = [item.nodeid for item in grouped if item.nodeid.rfind("@") <= item.nodeid.rfind("]")]  # as xdist reads it
    assert not lost, f"{len(lost)} grouped tests without their group, e.g. {lost[0]}"
