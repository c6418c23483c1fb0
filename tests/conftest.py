"""Repo-wide pytest configuration.

- Loads the evidence-harness plugin, which is opt-in (no ``pytest11`` entry point; see
  docs/harness.md): it declares the harness's ini options and prints its summary.
- Refuses a run of the whole suite that collected suspiciously few tests, so a broken
  import or a mis-set ``testpaths`` can never pass CI as "no tests collected".
- Turns the plan store off (``CONTRACTIONS_PLANS=off``), so no run depends on an earlier one.
"""

import os

import pytest

# The plan store (contractions/calls/store.py) would carry one test run's plans into the next,
# and a stored plan changes which tier serves a first call: off for the suite (and for the
# subprocesses it starts); tests/test_plan_store.py turns it on with files of its own.
os.environ["CONTRACTIONS_PLANS"] = "off"

pytest_plugins = ["contractions.testing.plugin"]

@pytest.fixture
def nothing_planned():
    """No structure planned before or after the test: the tiers and the structures' runners
    depend on what was planned (tests/test_tiers.py, tests/test_structures.py)."""
    from contractions.calls import remembered, runners
    from contractions.calls.structures import clear_structures

    remembered.clear_templates()
    clear_structures()
    runners.HOT.clear()
    runners._COMPILED.cache_clear()
    yield
    remembered.clear_templates()
    clear_structures()


@pytest.fixture
def search_is_dear(monkeypatch):
    """A full search priced far above any call: every first call takes a cheap tier."""
    from contractions.calls import tiers

    monkeypatch.setattr(tiers, "search_ns", lambda n, model=None: 1e15)


# The full suite has well over a thousand tests; far fewer means collection went wrong.
MINIMUM_FULL_SUITE = 500


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    whole_suite = not config.args or [str(a).rstrip("/") for a in config.args] in (["tests"], ["."])
    if whole_suite and not config.option.keyword and not config.option.markexpr \
            and len(session.items) < MINIMUM_FULL_SUITE:
        raise pytest.UsageError(
            f"only {len(session.items)} tests collected for the whole suite "
            f"(expected at least {MINIMUM_FULL_SUITE}); collection is broken")
