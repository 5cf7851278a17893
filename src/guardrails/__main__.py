"""``python -m guardrails``: the ``guardrails`` command, for environments without the script."""

import sys

from guardrails.cli import main

sys.exit(main())
