"""``python -m tribunal.cli``: the ``tribunal`` command (what the services' supervisors run)."""

from tribunal.cli import main

main()
