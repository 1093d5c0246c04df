"""``python -m soulpass.worker --redis URL …`` is ``soulpass worker --redis URL …``."""

import sys

from soulpass.cli.main import cli

if __name__ == "__main__":
    cli(["worker", *sys.argv[1:]], prog_name="soulpass")
