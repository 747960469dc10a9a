"""The ``collapsewatch`` command's entry point (the console script and ``python -m collapsewatch``).

``sql`` runs its query in a worker process (``store/sqlproc.py``) whose start-up — an interpreter importing DuckDB
and Arrow — is most of the command's time. Started here, before the command line's own imports (Typer, the
commands), the worker's start-up overlaps them; ``sql`` then takes the waiting worker (``sqlproc.prestart`` starts
none when one waits). Before that, ``sql`` asks a kept process that imported all of it already to run the
command (``kept.py``), and runs it here only where none is kept. Any other command imports nothing more than
before.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["sql"] and not {"--help", "-h"} & set(args):
        from . import kept

        code = kept.run(args)  # a kept warm process ran it (kept.py); None: run here
        if code is not None:
            sys.exit(code)
        from .store import sqlproc
        from .store.limits import Limits

        sqlproc.prestart(Limits().process_bytes)
    from .cli import main as cli_main

    cli_main(argv)
