"""Expiration timers for code that may hang, and the servers that reap workers whose timers expired.

    from ember.distributed.elastic import timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    with timer.expires(after=60):   # killed (and restarted by the agent) if this takes longer than 60 s
        train_one_epoch()

Pairs: ``LocalTimerServer``/``LocalTimerClient`` (a multiprocessing queue shared with child processes) and
``FileTimerServer``/``FileTimerClient`` (a named pipe; the agent's watchdog, see TORCHELASTIC_ENABLE_FILE_TIMER).
"""
from .api import TimerClient, TimerRequest, TimerServer, configure, expires
from .file_based_local_timer import FileTimerClient, FileTimerRequest, FileTimerServer
from .local_timer import LocalTimerClient, LocalTimerServer

__all__ = ["FileTimerClient", "FileTimerRequest", "FileTimerServer", "LocalTimerClient", "LocalTimerServer",
           "TimerClient", "TimerRequest", "TimerServer", "configure", "expires"]
