"""`python -m collapsewatch ...` (what torchrun launches: `torchrun ... -m collapsewatch train ...`)."""

from .launch import main

main()
