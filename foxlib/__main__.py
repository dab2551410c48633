"""`python -m foxlib`: the command line (foxlib.run.cli)."""
import sys

from foxlib.run.cli import main

if __name__ == "__main__":
    sys.exit(main())
