"""kforge.stream: the trainer's end of the reliable trajectory stream.

    from kforge.stream import TrajectoryStream   # also kforge.TrajectoryStream

Its parts, a module each:

    receiver.py  TrajectoryStream: the receiver the trainer holds
    io.py        StreamIO, the thread that alone owns the ROUTER socket
    protocol.py  the wire messages (trainer_bridge/STREAM.md)
    state.py     ReceiverState: the acknowledged set kept across restarts
    delivery.py  Delivery, Batch and the (worker, seq) keys that ack them
    curve.py     CurveZMQ keys and whether an endpoint is reachable from afar

Before it was a package, kforge.stream was one module; every name imported
from it then (the private ones too) is still imported from here.
"""

from . import protocol as proto
from .curve import _ZAP_DOMAIN, _curve_key, _is_local
from .delivery import Batch, Delivery, Key, _key_of
from .io import StreamIO, _Session
from .receiver import ACK_MODES, TrajectoryStream, _log
from .state import ReceiverState

__all__ = ["ACK_MODES", "Batch", "Delivery", "Key", "ReceiverState", "StreamIO", "TrajectoryStream", "proto"]
