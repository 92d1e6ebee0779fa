"""`python -m worker.commands.cli`, as the tests and the harnesses start a command."""

import sys

from worker.commands.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
