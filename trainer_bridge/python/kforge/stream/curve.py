"""Transport security of a TrajectoryStream (kforge.stream): CurveZMQ keys
given as text or certificate files, and whether an endpoint is reachable
from other hosts (then traffic without CurveZMQ is worth a warning)."""

from __future__ import annotations

import os
from typing import Union

from zmq.utils import z85

# The ZAP domain of the stream's sockets (pyzmq's authenticator matches it
# exactly; "*" is not a wildcard there).
_ZAP_DOMAIN = "kforge-stream"


def _curve_key(value: Union[str, bytes], want_secret: bool, what: str) -> bytes:
    """A Z85 key, given as text or as the path of a certificate file."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if len(value) == 40 and not os.path.exists(value):
        try:
            z85.decode(value.encode("ascii"))
            return value.encode("ascii")
        except Exception:
            pass
    if not os.path.isfile(value):
        raise ValueError(f"{what} {value[:80]!r} is neither a 40-character Z85 key nor a certificate file")
    import zmq.auth

    public, secret = zmq.auth.load_certificate(value)
    if want_secret:
        if not secret:
            raise ValueError(f"{what}: {value} holds no secret key (give the .key_secret file)")
        return secret
    return public


def _is_local(endpoint: str) -> bool:
    """True for endpoints only this host can reach (the same rule as the C++
    side, core/endpoint.h)."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        return False
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        return False
    if ";" in rest:
        rest = rest.split(";", 1)[1]
    host = rest.rsplit(":", 1)[0] if ":" in rest else rest
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host in ("localhost", "lo", "::1") or host.startswith("127.")
