"""The five evidence suites (docs/harness.md), run over this repo through the public harness.

The suites themselves live in `contractions.testing.suites`; this module only says what to
scan and where the table is, exactly as a downstream project would (docs/harness.md).
Adding a grouped string anywhere under the scanned paths makes
`test_contractions_table_has_entry` fail until its entry is decided by hand in
`identifiability_table.txt`; the oracle, call-site, split and sharding suites then cover it.
"""

# The star import brings in the tests and the pytest_generate_tests that parametrizes them.
from contractions.testing.suites import *  # noqa: F403  (the documented adoption path)

CONTRACTIONS_SCAN_PATHS = ["../contractions", "../examples"]  # relative to this file
CONTRACTIONS_TABLE = "identifiability_table.txt"
