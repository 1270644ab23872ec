"""In-memory checkpoints that survive a worker restart without touching disk.

A training script keeps its model, optimizer and loop variables in a ``State``; ``commit()`` copies them into the
local agent's memory (the agent outlives its workers), ``restore()`` in a restarted worker brings back the last
commit every rank agrees on. A rank that has none (a node that just joined) receives it from one that has.

    state = State(model=model, optimizer=optimizer, epoch=0)
    dist.init_process_group("gloo")
    state.restore()                      # False on the first attempt: nothing committed yet
    for epoch in range(state.epoch, epochs):
        train_one_epoch(model, optimizer)
        state.epoch = epoch + 1
        state.commit()                   # every rank, at the same point of the loop

The agent keeps each local rank's last two commits, so that ranks which crashed between their commits (one rank
committed epoch 5, another died before) still restore the same epoch: the newest one all of them hold. Outside an
elastic agent (no EMBER_ELASTIC_STATE_STORE), commits stay in this process and ``restore()`` finds nothing after a
restart.

Under Ray (``emberrun --ray-address``), the node's agent also keeps each rank's last commit in Ray's object store,
with a copy on another node of the job: ``commit()`` returns once both exist, and a node started in place of a
lost one restores the lost node's last commit.
"""
import io
import os
from datetime import timedelta

from ember.distributed import HashStore, TCPStore

__all__ = ["State"]

_ENV = "EMBER_ELASTIC_STATE_STORE"
_MIRROR_ENV = "EMBER_ELASTIC_STATE_MIRROR"
_NO_COMMIT = -1


def _agent_store():
    where = os.environ.get(_ENV)
    if not where:
        return HashStore()
    host, _, port = where.rpartition(":")
    return TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=60))


def _dist():
    """ember.distributed when a process group of several ranks is up, else None."""
    import ember.distributed as dist
    return dist if dist.is_initialized() and dist.get_world_size() > 1 else None


class State:
    """A model, an optimizer (anything with ``state_dict``/``load_state_dict``) and named values (attributes of
    the State: ``state.epoch``) committed together."""

    def __init__(self, model=None, optimizer=None, **values):
        self.__dict__.update(_model=model, _optimizer=optimizer, _values=dict(values), _store=_agent_store(),
                             _prefix=os.environ.get("LOCAL_RANK", "0"), _version=_NO_COMMIT)

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"'State' object has no attribute '{name}'") from None

    def __setattr__(self, name, value):
        self._values[name] = value

    @property
    def version(self):
        """How many commits this job made so far, minus one (-1: none)."""
        return self._version

    def _payload(self):
        import ember
        buf = io.BytesIO()
        ember.save({"model": None if self._model is None else self._model.state_dict(),
                    "optimizer": None if self._optimizer is None else self._optimizer.state_dict(),
                    "values": self._values}, buf)
        return buf.getvalue()

    def _load(self, blob):
        import ember
        data = ember.load(io.BytesIO(blob), weights_only=False)
        if self._model is not None and data["model"] is not None:
            self._model.load_state_dict(data["model"])
        if self._optimizer is not None and data["optimizer"] is not None:
            self._optimizer.load_state_dict(data["optimizer"])
        self._values.clear()
        self._values.update(data["values"])

    def _key(self, what):
        return f"{self._prefix}/{what}"

    def commit(self):
        """Copy the current model, optimizer and values to the agent (it keeps this commit and the previous)."""
        version = self._version + 1
        self._store.set(self._key(f"v{version}"), self._payload())
        self._store.set(self._key("latest"), str(version))
        if os.environ.get(_MIRROR_ENV) == "1":
            # under Ray the agent copies the commit to Ray's object store on two nodes before this returns
            self._store.wait([self._key(f"m{version}")])
        if version >= 2:
            self._store.delete_key(self._key(f"v{version - 2}"))
        self.__dict__["_version"] = version

    def _latest(self):
        return int(self._store.get(self._key("latest"))) if self._store.check([self._key("latest")]) \
            else _NO_COMMIT

    def _blob(self, version, latest):
        return self._store.get(self._key(f"v{version}")) if version in (latest, latest - 1) and version >= 0 \
            else None

    def restore(self):
        """Load the newest commit every rank holds (ranks missing it get it from one that has it); whether there
        was one. Call it on every rank, after init_process_group when there are several."""
        latest = self._latest()
        dist = _dist()
        if dist is None:
            if latest == _NO_COMMIT:
                return False
            self._load(self._blob(latest, latest))
            self.__dict__["_version"] = latest
            return True
        versions = [None] * dist.get_world_size()
        dist.all_gather_object(versions, latest)
        held = [v for v in versions if v != _NO_COMMIT]
        if not held:
            return False
        target = min(held)
        blob = self._blob(target, latest)
        lacking = [None] * len(versions)
        dist.all_gather_object(lacking, blob is None)
        if any(lacking):
            box = [blob]
            dist.broadcast_object_list(box, src=lacking.index(False))
            blob = box[0]
        self._load(blob)
        self.__dict__["_version"] = target
        return True

    def sync(self, src=0):
        """Make every rank's state equal to rank ``src``'s (e.g. after adding a node mid-job)."""
        dist = _dist()
        if dist is None:
            return
        box = [self._payload() if dist.get_rank() == src else None]
        dist.broadcast_object_list(box, src=src)
        self._load(box[0])
