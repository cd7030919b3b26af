"""`python -m strands_durable.api.cli`: the `durable` command."""

from strands_durable.api.cli import main

main()
