"""``python -m callsafe`` runs the command-line interface."""

from callsafe.certify.cli import main

main()
