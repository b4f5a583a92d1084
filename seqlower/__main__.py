"""``python -m seqlower`` runs the command line, as the ``seqlower`` script does."""

from seqlower.cli import main

main()
