"""``python -m callsafe`` runs the command-line interface."""

from callsafe.cli.main import main

main()
