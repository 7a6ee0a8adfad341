"""`python -m rolloutlog`: the `rolloutlog` command, for an environment without its script."""

from rolloutlog.cli.main import main

main(prog_name="rolloutlog")
