"""Any run an orchestrator keeping the contract could record, recorded through `Recorder`,
replays clean: the orchestrator here is drawn call by call, each call one the contract
allows in the state so far (built by construction, never filtered)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.record import Recorder
from tests.record.clean import replay_problems


@attrs.define
class Orchestrator:
    """What a contract-keeping orchestrator knows: its groups, queue, step and version."""

    size: int
    bound: int
    limit: int
    per_group: bool
    step: int = 1
    version: int = 0
    t: float = 0.0
    groups: dict[str, dict[str, object]] = attrs.Factory(dict)
    inflight: dict[str, tuple[str, int]] = attrs.Factory(dict)  # episode -> (group, version)
    queue: dict[str, int] = attrs.Factory(dict)  # admitted episode -> version
    arrived: dict[str, dict[str, tuple[int, float | None]]] = attrs.Factory(dict)

    def stale(self, version: int) -> bool:
        return self.step - 1 - version > self.bound

    def owed(self, group: str) -> int:
        return int(self.groups[group]["owed"])  # type: ignore[call-overload]


def _act(data: st.DataObject, rec: Recorder, orc: Orchestrator, n: int) -> None:
    orc.t += data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    t = orc.t
    owing = [g for g in orc.groups if orc.owed(g)]
    done = [
        g
        for g, info in orc.groups.items()
        if not info["scored"]
        and not orc.owed(g)
        and not any(v[0] == g for v in orc.inflight.values())
    ]
    actions = ["open"]
    if owing and len(orc.inflight) < orc.limit and orc.step - 1 - orc.version <= orc.bound:
        actions.append("dispatch")
    if orc.inflight:
        actions += ["arrive", "arrive", "cancel"]
    if done:
        actions.append("score")
    if orc.queue:
        actions.append("ship")
    if orc.version < orc.step - 1:
        actions.append("publish")
    action = data.draw(st.sampled_from(actions))
    if action == "open":
        group = f"group-{n}"
        rec.open_group(t, group, env="math", task=f"t{n % 3}", size=orc.size)
        orc.groups[group] = {"owed": orc.size, "next": 0, "scored": False, "v": orc.version}
        orc.arrived[group] = {}
    elif action == "dispatch":
        group = data.draw(st.sampled_from(owing))
        info = orc.groups[group]
        episode = f"{group}-m{info['next']}"
        rec.dispatch(t, group, episode)
        info["next"] = int(info["next"]) + 1  # type: ignore[call-overload]
        info["owed"] = orc.owed(group) - 1
        stamp = int(info["v"]) if orc.per_group else orc.version  # type: ignore[call-overload]
        orc.inflight[episode] = (group, stamp)
    elif action == "arrive":
        episode = data.draw(st.sampled_from(sorted(orc.inflight)))
        group, version = orc.inflight.pop(episode)
        if data.draw(st.booleans()):
            reward = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
            rec.complete(t, episode, reward=reward, prompt_tokens=10, completion_tokens=n)
        else:
            reward = None
            rec.fail(t, episode, error="boom")
        orc.arrived[group][episode] = (version, reward)
    elif action == "cancel":
        group = data.draw(st.sampled_from(sorted({g for g, _ in orc.inflight.values()})))
        mine = sorted(e for e, (g, _) in orc.inflight.items() if g == group)
        episodes = data.draw(st.lists(st.sampled_from(mine), unique=True, min_size=1))
        unscheduled = data.draw(st.integers(0, orc.owed(group)))
        rec.cancel(t, group, episodes, unscheduled=unscheduled, reason="overload")
        for episode in episodes:
            del orc.inflight[episode]
        orc.groups[group]["owed"] = orc.owed(group) - unscheduled
    elif action == "score":
        group = data.draw(st.sampled_from(done))
        fresh = {}
        for episode, (version, reward) in orc.arrived[group].items():
            if orc.stale(version):
                rec.drop(t, episode)
            elif reward is not None:
                fresh[episode] = (version, reward)
        mean = sum(r for _, r in fresh.values()) / len(fresh) if fresh else 0.0
        equal = len({r for _, r in fresh.values()}) <= 1
        advantages = {e: 0.0 if equal else r - mean for e, (_, r) in fresh.items()}
        admitted = bool(fresh) and data.draw(st.booleans())
        rec.score(t, group, advantages, admitted=admitted)
        orc.groups[group]["scored"] = True
        if admitted:
            orc.queue |= {e: v for e, (v, _) in fresh.items()}
    elif action == "ship":
        for episode in [e for e, v in orc.queue.items() if orc.stale(v)]:
            rec.drop(t, episode)  # the queue sweep
            del orc.queue[episode]
        if orc.queue:
            cut = data.draw(st.lists(st.sampled_from(sorted(orc.queue)), unique=True, min_size=1))
            trained = [e for e in cut if data.draw(st.booleans())]
            rec.ship(t, cut, trained=trained)
            for episode in cut:
                del orc.queue[episode]
            orc.step += 1
    elif action == "publish":
        orc.version = data.draw(st.integers(orc.version + 1, orc.step - 1))
        rec.version_pending(t, orc.version)
        for episode, (group, version) in sorted(orc.inflight.items()):
            if orc.stale(version):  # cancelled before the update, one group at a time
                rec.cancel(t, group, [episode], reason="stale")
                del orc.inflight[episode]
        rec.version_live(t, orc.version)


@given(
    st.data(),
    st.integers(1, 4),
    st.integers(0, 2),
    st.integers(1, 6),
    st.sampled_from(["per-episode", "per-group"]),
)
def test_a_recorded_run_always_replays_clean(
    data: st.DataObject, size: int, bound: int, limit: int, staleness: str
) -> None:
    config = {
        "group_size": size,
        "batch_size": 2,
        "max_off_policy_steps": bound,
        "target_lag": bound,
        "max_inflight": limit,
        "staleness": staleness,
    }
    orc = Orchestrator(size=size, bound=bound, limit=limit, per_group=staleness == "per-group")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.arrow"
        with Recorder(path, config=config, code_version="drawn") as rec:
            for n in range(data.draw(st.integers(0, 40))):
                _act(data, rec, orc, n)
            if data.draw(st.booleans()):
                rec.finish(orc.t + 1.0)
        assert replay_problems(path) == []
