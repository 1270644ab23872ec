"""Event records of the agent and of the rendezvous, serialised as JSON."""
import json
from dataclasses import asdict, dataclass, field
from enum import Enum

__all__ = ["EventSource", "Event", "NodeState", "RdzvEvent", "EventMetadataValue"]

EventMetadataValue = str | int | float | bool | None


class EventSource(str, Enum):  # noqa: UP042  (torch's str() and format())
    """Who produced an event."""
    AGENT = "AGENT"
    WORKER = "WORKER"


class NodeState(str, Enum):  # noqa: UP042  (torch's str() and format())
    """A rendezvous node's state when it recorded an event."""
    INIT = "INIT"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


def _loads(data, enum_field, enum_cls):
    fields = json.loads(data)
    fields[enum_field] = enum_cls[fields[enum_field]]
    return fields


@dataclass
class Event:
    """Something that happened in an elastic job: ``name``, its ``source``, a ``timestamp`` in milliseconds and
    ``metadata`` (str, int, float, bool or None values)."""
    name: str
    source: EventSource
    timestamp: int = 0
    metadata: dict[str, EventMetadataValue] = field(default_factory=dict)

    def __str__(self):
        return self.serialize()

    def serialize(self):
        return json.dumps(asdict(self))

    @staticmethod
    def deserialize(data):
        return data if isinstance(data, Event) else Event(**_loads(data, "source", EventSource))


@dataclass
class RdzvEvent:
    """A step of a node in the dynamic rendezvous."""
    name: str
    run_id: str
    message: str
    hostname: str
    pid: int
    node_state: NodeState
    master_endpoint: str = ""
    rank: int | None = None
    local_id: int | None = None
    error_trace: str = ""

    def __str__(self):
        return self.serialize()

    def serialize(self):
        return json.dumps(asdict(self))

    @staticmethod
    def deserialize(data):
        return data if isinstance(data, RdzvEvent) else RdzvEvent(**_loads(data, "node_state", NodeState))
