"""``python -m app``: the ``eos-bridge`` command without the installed script."""

from app.commands.cli import main

raise SystemExit(main())
