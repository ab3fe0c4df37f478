"""`python -m opscope`: the same as the `opscope` command."""

from opscope.cli.main import entry

if __name__ == "__main__":
    entry()
