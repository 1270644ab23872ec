"""The elastic agent: ``ElasticAgent`` (the interface), ``SimpleElasticAgent`` (the steps and policies of one worker
group), ``LocalElasticAgent`` (workers as processes of this host, in ``local_elastic_agent``), and the
``WorkerSpec``, ``Worker``, ``WorkerGroup``, ``WorkerState`` and ``RunResult`` they work with.

    spec = WorkerSpec(role="trainer", local_world_size=2, entrypoint=trainer, args=("foobar",),
                      rdzv_handler=rdzv_handler, max_restarts=3, monitor_interval=0.1)
    result = LocalElasticAgent(spec, start_method="spawn").run()
    if not result.is_failed():
        print(result.return_values[0])   # global rank 0's return value
"""
from .api import (
    ElasticAgent,
    RunResult,
    SimpleElasticAgent,
    Worker,
    WorkerGroup,
    WorkerSpec,
    WorkerState,
)
from .local_elastic_agent import TORCHELASTIC_ENABLE_FILE_TIMER, TORCHELASTIC_TIMER_FILE, LocalElasticAgent

__all__ = ["ElasticAgent", "LocalElasticAgent", "RunResult", "SimpleElasticAgent", "TORCHELASTIC_ENABLE_FILE_TIMER",
           "TORCHELASTIC_TIMER_FILE", "Worker", "WorkerGroup", "WorkerSpec", "WorkerState"]
