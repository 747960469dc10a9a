"""`python -m collapsewatch ...` (what torchrun launches: `torchrun ... -m collapsewatch train ...`)."""

from .cli import main

main()
