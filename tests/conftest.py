"""Repo-wide pytest configuration.

- Loads the evidence-harness plugin from a source checkout too (when the package is
  installed, its ``pytest11`` entry point loads it; naming it twice is an error).
- Refuses a run of the whole suite that collected suspiciously few tests, so a broken
  import or a mis-set ``testpaths`` can never pass CI as "no tests collected".
"""

import importlib.metadata

import pytest

_installed = any(ep.name == "contractions"
                 for ep in importlib.metadata.entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["contractions.testing.plugin"]

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
