"""The account: the independent check of a run's log, one entry point (`Account`) over
small checks that each own their books (`core.account.account` says what it checks)."""

from rolloutlog.core.account.account import FEEDS, Account, HoldsDispatcher
from rolloutlog.core.account.books import InvariantViolation
from rolloutlog.core.account.groups import Group
from rolloutlog.core.account.sink import ADVANTAGE_TOLERANCE

__all__ = [
    "ADVANTAGE_TOLERANCE",
    "FEEDS",
    "Account",
    "Group",
    "HoldsDispatcher",
    "InvariantViolation",
]
