"""Hand-made decided events for scenarios that build histories by hand."""

from __future__ import annotations

from rolloutlog.events.types import EpisodeDispatched, GroupOpened, GroupScored


def opened(group_id: str, version: int, step: int, size: int = 2) -> GroupOpened:
    """A train group `group_id` (not frozen) opened at `version` during `step`."""
    return GroupOpened(
        t=0.0,
        group_id=group_id,
        work="train",
        env="main",
        task_id="t0",
        group_size=size,
        policy_version=version,
        step=step,
        frozen=False,
    )


def dispatched(episode_id: str, version: int) -> EpisodeDispatched:
    """Member `g<n>/<m>` dispatched, stamped with `version`."""
    group_id, _, member = episode_id.partition("/")
    return EpisodeDispatched(
        t=0.0, episode_id=episode_id, group_id=group_id, member=int(member), policy_version=version
    )


def scored(group_id: str) -> GroupScored:
    """Lone member `<group_id>/0` scored (advantage 0) and admitted."""
    return GroupScored(
        t=0.0, group_id=group_id, episode_ids=(f"{group_id}/0",), advantages=(0.0,), admitted=True
    )
