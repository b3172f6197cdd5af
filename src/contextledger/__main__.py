"""``python -m contextledger``: the command line, as the ``contextledger`` script runs it."""

from contextledger.cli import main

if __name__ == "__main__":
    main()
