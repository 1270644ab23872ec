"""The job's rendezvous and restart state on Ray: one named actor per job, restarted by Ray when it dies.

Its state (round, members, restarts used) is written to Ray's GCS key-value store on every change and read back
when Ray restarts the actor, and every method may run twice (Ray retries a call the dead actor did not answer),
so a restart of the coordinator loses nothing and no restart of the budget is counted twice.
"""
import json

import ray
from ray.experimental import internal_kv

__all__ = ["NAMESPACE", "JobCoordinator", "coordinator_name"]

NAMESPACE = "ember-elastic"


def coordinator_name(run_id):
    return f"ember-elastic:{run_id}"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class JobCoordinator:
    def __init__(self, run_id, max_restarts):
        self._key = coordinator_name(run_id)
        saved = internal_kv._internal_kv_get(self._key, namespace=NAMESPACE)
        self._state = json.loads(saved) if saved else {
            "round": 0, "members": [], "max_restarts": max_restarts, "restarts": 0, "granted": [], "lives": 0}
        self._state["lives"] += 1  # how many times this actor started (1 + Ray's restarts of it)
        self._save()

    def _save(self):
        internal_kv._internal_kv_put(self._key, json.dumps(self._state), overwrite=True, namespace=NAMESPACE)

    def begin_round(self, round_no, members):
        """Record round ``round_no`` of ``members`` (node names by group rank); the restarts used so far."""
        if round_no >= self._state["round"]:  # the same number again: a retry of a round a node left
            self._state.update(round=round_no, members=list(members))
            self._save()
        return self._state["restarts"]

    def use_restart(self, round_no):
        """Whether round ``round_no``, which failed, may be restarted: the first call of a round uses one restart
        of the job's budget (later calls of the same round get the same answer)."""
        if round_no in self._state["granted"]:
            return True
        if self._state["restarts"] >= self._state["max_restarts"]:
            return False
        self._state["restarts"] += 1
        self._state["granted"].append(round_no)
        self._save()
        return True

    def state(self):
        return dict(self._state)

    def forget(self):
        """The job ended: drop the saved state."""
        internal_kv._internal_kv_del(self._key, namespace=NAMESPACE)
