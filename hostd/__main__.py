"""``python -m hostd``: the same as the ``hostd`` command."""

from hostd.cli import main

raise SystemExit(main())
