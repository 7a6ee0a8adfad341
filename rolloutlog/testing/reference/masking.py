"""`stale_tokens = mask` in the reference's own words (docs/contract.md, "Weight updates and
work in flight"): an episode's segments, one per version it generated under, are read
from its interruptions and resumptions. A drop reads its last segment's version (`end`),
a stale cancellation before an update the version its next tokens would come from, and a
batch masks the completion tokens of its trained episodes' segments past the bound."""

from __future__ import annotations

from rolloutlog.testing.reference.record import Episode, Record
from rolloutlog.testing.reference.rules import past_bound


def masking(record: Record) -> bool:
    return record.config.stale_tokens == "mask"


def end(episode: Episode) -> int:
    """The version of its last segment: its dispatch version until it is resumed."""
    return episode.resumed_at[-1] if episode.resumed_at else episode.version


def staleness_version(record: Record, episode: Episode) -> int:
    """The version a drop of this arrived or queued episode reads."""
    return end(episode) if masking(record) else episode.version


def goes_on_under(record: Record, episode: Episode) -> int:
    """The version a stale cancellation of this in-flight episode reads: under `mask`, the
    announced version if inference interrupts at updates or it waits interrupted, else its
    end; under `drop`, its dispatch version."""
    if not masking(record):
        return episode.version
    if record.config.weight_update == "interrupt" or episode.waiting:
        return record.version
    return end(episode)


def masked(record: Record, episode: Episode, step: int) -> int:
    """Its completion tokens from versions past the bound in batch `step`."""
    if not masking(record):
        return 0
    group = record.group_of(episode)
    versions = [episode.version, *episode.resumed_at]
    marks = [0, *episode.stopped_at[: len(versions) - 1], episode.completion]
    return sum(
        marks[k + 1] - marks[k]
        for k, version in enumerate(versions)
        if past_bound(record.config, group.train, group.frozen, version, step)
    )
