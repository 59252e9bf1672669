"""python -m costmodel: the cost4d command line."""

from costmodel.cli import main

main()
