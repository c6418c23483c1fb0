"""``python -m contractions`` runs the command-line tool (see `contractions.cli`)."""

import sys

from .cli import main

sys.exit(main())
