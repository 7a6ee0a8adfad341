"""The rule families, one module of pure functions each; the deciders call these.

- `admission`: how many episodes may go out (permits, capacity, smoothing's window and
  burst) and which version each carries (stamping); `admission_field` the field's
  admission rules on its ledger (AReaL, PR #822, PipelineRL, ROLL), `admission_budget`
  verl's sample budget;
- `cancellation`: in-flight cancellations (stale, straggler, overload, shutdown, restart);
- `acceptance`: what the sink drops as stale (an arrival, its future siblings, the queue);
- `composition`: batch composition (the order the queue is taken in, the batch cut).

Which function of a family a run uses is a row of the preset table (`core.presets`).
"""
