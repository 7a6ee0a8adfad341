"""The checks of one run's account, and for each point of an event's flow the ones it uses.

Each check is a small class with its own books that reads the shared ones (`Books`). A
check names the points of the flow it is fed at by its methods (`POINTS`: `opening` before
a train group is added, `opened` after, `dispatching`, `admitted`, `dispatched`,
`cancelled`, `stale_cancelled`, `arriving`, `arrived`, `dropping`, `dropped`, `scoring`,
`room`, `finalized`, `scored`, `shipping`, `ships`, `moved`, `announcing`, `announced`,
`live`, `settled` after any world event's reactions, `update_settled` after a
`version_pending`'s); `used(config)` says whether a run feeds it at all. The flows
(`core.account.account`, `core.account.sink`) call each point's tuple of the used checks'
methods, so a rule a run does not use costs nothing. Events that belong to one rule only (an
interruption, a `requeue` drop, an eviction, a restart) go to its check whether the run uses
the rule or not: that check refuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from rolloutlog.core.account.admission import Areal, Capacity, MaxLag, Outstanding, Roll
from rolloutlog.core.account.books import Books
from rolloutlog.core.account.budget import VerlBudget
from rolloutlog.core.account.eviction import Eviction
from rolloutlog.core.account.in_flight import StaleInFlight
from rolloutlog.core.account.leftovers import Leftovers
from rolloutlog.core.account.mask import Mask
from rolloutlog.core.account.partial import Partial, UpdatePause
from rolloutlog.core.account.redundancy import Redundancy
from rolloutlog.core.account.requeue import Requeue
from rolloutlog.core.account.restart import Restarts
from rolloutlog.core.account.ship_wait import ShipWait
from rolloutlog.core.account.tokens import TokenAges
from rolloutlog.core.account.withhold import Withhold
from rolloutlog.core.config import RunConfig

POINTS: Final = (
    "opening",
    "opened",
    "dispatching",
    "admitted",
    "dispatched",
    "cancelled",
    "stale_cancelled",
    "arriving",
    "arrived",
    "dropping",
    "dropped",
    "scoring",
    "room",
    "finalized",
    "scored",
    "shipping",
    "ships",
    "moved",
    "announcing",
    "announced",
    "live",
    "settled",
    "update_settled",
)


class Checks:
    """Every check of the account (each its own books), and per point the used ones' methods:
    a tuple, empty where no used check has the point (the flows of the most frequent events
    test it before iterating: a loop over an empty tuple still allocates an iterator)."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.restarts = Restarts(books)
        self.partial = Partial(books, config)
        self.tokens = TokenAges(books, config)
        self.mask = Mask(books, config, self.partial)
        self.capacity = Capacity(books, config)
        self.areal = Areal(books, config)
        self.outstanding = Outstanding(books, config)
        self.max_lag = MaxLag(books, config)
        self.roll = Roll(books, config)
        self.budget = VerlBudget(books, config)
        self.requeue = Requeue(books, config)
        self.leftovers = Leftovers(books, config)
        self.eviction = Eviction(books, config)
        self.withhold = Withhold(books, config)
        self.redundancy = Redundancy(books, config)
        self.in_flight = StaleInFlight(books, config)
        self.update_pause = UpdatePause(books, self.partial)
        self.ship_wait = ShipWait(books, config)
        # In the order each point calls them: the order the properties are checked in.
        every: tuple[Any, ...] = (
            self.partial,
            self.tokens,
            self.mask,
            self.areal,
            self.outstanding,
            self.max_lag,
            self.roll,
            self.requeue,
            self.budget,
            self.leftovers,
            self.withhold,
            self.capacity,
            self.update_pause,
            self.in_flight,
            self.eviction,
            self.redundancy,
            self.ship_wait,
        )
        used = [check for check in every if check.used(config)]
        self.masks = self.mask in used
        self.withholding = self.withhold in used
        self.partial.takers = tuple(c.take for c in (self.tokens, self.mask) if c in used)
        if self.masks:
            self.in_flight.goes_on_under = self.mask.goes_on_under
        points = {name: _methods(used, name) for name in POINTS}
        self.opening = points["opening"]
        self.opened = points["opened"]
        self.dispatching = points["dispatching"]
        self.admitted = points["admitted"]
        self.dispatched = points["dispatched"]
        self.cancelled = points["cancelled"]
        self.stale_cancelled = points["stale_cancelled"]
        self.arriving = points["arriving"]
        self.arrived = points["arrived"]
        self.dropping = points["dropping"]
        self.dropped = points["dropped"]
        self.scoring = points["scoring"]
        self.room = points["room"]
        self.finalized = points["finalized"]
        self.scored = points["scored"]
        self.shipping = points["shipping"]
        self.ships = points["ships"]
        self.moved = points["moved"]
        self.announcing = points["announcing"]
        self.announced = points["announced"]
        self.live = points["live"]
        self.settled = points["settled"]
        self.update_settled = points["update_settled"]


def _methods(used: list[Any], point: str) -> tuple[Callable[..., None], ...]:
    """The bound methods that the used checks define for `point`, in their order."""
    return tuple(getattr(check, point) for check in used if point in type(check).__dict__)
