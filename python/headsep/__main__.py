"""``python -m headsep ARGS``: the headsep command line, as the ``headsep`` console script runs it
(headsep/_cli.py)."""
import sys

from headsep._cli import main

if __name__ == "__main__":
    sys.exit(main())
