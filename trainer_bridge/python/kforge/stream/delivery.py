"""What a TrajectoryStream hands the trainer: deliveries, batches of them,
and the (worker, seq) keys that acknowledge them (kforge.stream)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple, Union

Key = Tuple[str, int]


@dataclass
class Delivery:
    """One trajectory as delivered: who sent it, its seq, and the trajectory
    itself (``data``, the dict the worker recorded)."""

    worker: str
    seq: int
    id: str
    data: Dict[str, Any]
    received_at: float = field(default=0.0, repr=False)

    @property
    def key(self) -> Key:
        return (self.worker, self.seq)

    @property
    def trajectory(self) -> Dict[str, Any]:
        return self.data


class Batch(List[Delivery]):
    """A list of deliveries, with their keys and trajectories at hand."""

    @property
    def keys(self) -> List[Key]:
        return [d.key for d in self]

    @property
    def trajectories(self) -> List[Dict[str, Any]]:
        return [d.data for d in self]

    @property
    def ids(self) -> List[str]:
        return [d.id for d in self]


def _key_of(item: Union[Delivery, Key]) -> Key:
    if isinstance(item, Delivery):
        return item.key
    worker, seq = item
    return (str(worker), int(seq))
