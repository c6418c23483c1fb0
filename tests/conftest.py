"""Repo-wide pytest configuration.

- Loads the evidence-harness plugin, which is opt-in (no ``pytest11`` entry point; see
  docs/harness.md): it declares the harness's ini options and prints its summary.
- Refuses a run of the whole suite that collected suspiciously few tests, so a broken
  import or a mis-set ``testpaths`` can never pass CI as "no tests collected".
"""

import pytest

pytest_plugins = ["contractions.testing.plugin"]

@pytest.fixture
def nothing_planned():
    """No structure planned before or after the test: the tiers and the structures' runners
    depend on what was planned (tests/test_tiers.py, tests/test_structures.py)."""
    from contractions import api
    from contractions.schedule import tiers
    from contractions.structures import clear_structures

    tiers.clear_templates()
    clear_structures()
    api._HOT.clear()
    api._compiled.cache_clear()
    yield
    tiers.clear_templates()
    clear_structures()


@pytest.fixture
def search_is_dear(monkeypatch):
    """A full search priced far above any call: every first call takes a cheap tier."""
    from contractions.schedule import tiers

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
