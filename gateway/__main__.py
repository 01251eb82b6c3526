"""`python -m gateway …`: the same commands as the `gateway` console script."""

from gateway.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
