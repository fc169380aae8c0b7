"""`python -m agent.cli ...` is the `agent` command."""

from agent.cli.app import main

main()
