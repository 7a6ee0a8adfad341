"""Run a driver, then summarize its log: one function per kind of run.

`simulate.run_policy` (the simulator; `simulate`, `whatif` and each sweep cell) and
`train.run_training` (the live runtime; `train` and `train --resume`) each start their
driver, write the log, and return the command's `--json` report. The commands in `cli/`
only parse their options and print what these return.
"""
