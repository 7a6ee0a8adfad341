"""Trace-driven what-if: fit a simulator world to a recorded log (`rolloutlog whatif`)."""

from rolloutlog.studies.whatif.fit import FittedRun, fit_log, with_overrides
from rolloutlog.studies.whatif.recorded import recorded_report

__all__ = ["FittedRun", "fit_log", "recorded_report", "with_overrides"]
