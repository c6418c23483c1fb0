"""Repo-wide pytest configuration.

- Loads the evidence-harness plugin, which is opt-in (no ``pytest11`` entry point; see
  docs/harness.md): it declares the harness's ini options and prints its summary.
- Refuses a run of the whole suite that collected suspiciously few tests, so a broken
  import or a mis-set ``testpaths`` can never pass CI as "no tests collected".
"""

import pytest

pytest_plugins = ["contractions.testing.plugin"]

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
