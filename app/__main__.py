"""``python -m app``: the ``eos-bridge`` command without the installed script."""

from app.commands.cli import main

if __name__ == "__main__":  # not on a plain import (a walk over every module imports this one)
    raise SystemExit(main())
