"""Run a driver, then summarize its log: one function per kind of run.

`simulate.run_policy` (the simulator: one policy, as each sweep cell runs it),
`simulate.run_policies` (several on one world: `simulate` and `whatif`) and
`train.run_training` (the live runtime; `train` and `train --resume`) each start their
driver, write the log, and return the command's `--json` report. The commands in `cli/`
only parse their options and print what these return.
"""
