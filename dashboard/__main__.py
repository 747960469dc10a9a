"""``python -m collapsewatch.dashboard STORE [--host H] [--port P]`` (the CLI's ``collapsewatch dash``)."""

from .app import main

main()
