"""``python -m statemix``: the command line (the same as the ``statemix`` command)."""

from statemix_cli.main import run

run()
