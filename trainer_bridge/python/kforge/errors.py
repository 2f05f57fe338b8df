"""Exceptions raised by the kforge client."""

from __future__ import annotations

from typing import Any, Optional


class KForgeError(Exception):
    """An error reply from the env server, or a failure of the client itself.

    Attributes:
        code: the protocol's error code (``unknown_env``, ``invalid_task``, ...;
            see ``kforge.protocol.ERROR_CODES``), or a client-side code such as
            ``timeout`` or ``bad_reply``.
        message: what went wrong, written for a person.
        field: JSON pointer into the request that is at fault
            (``/params/task/inputs/0/shape``), or None.
        request_id: the id of the request the error answers, when known.
        env_id: the env the request was about, when known.
    """

    def __init__(
        self,
        code: str,
        message: str,
        field: Optional[str] = None,
        *,
        request_id: Optional[int] = None,
        env_id: Optional[Any] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field or None
        self.request_id = request_id
        self.env_id = env_id

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.field and self.field not in self.message:
            text += f" (field {self.field})"
        return text

    def __repr__(self) -> str:
        return f"KForgeError(code={self.code!r}, message={self.message!r}, field={self.field!r})"


class KForgeTimeout(KForgeError, TimeoutError):
    """No reply came within the timeout.

    The request was not retried: it may still be running on the server (a
    step keeps its env busy until it finishes, and its late reply is dropped).
    """

    def __init__(self, message: str, *, request_id: Optional[int] = None, env_id: Optional[Any] = None) -> None:
        super().__init__("timeout", message, request_id=request_id, env_id=env_id)


class ServerExited(KForgeError):
    """A locally started ``kforge serve`` process exited before it was ready."""

    def __init__(self, message: str, returncode: Optional[int]) -> None:
        super().__init__("server_exited", message)
        self.returncode = returncode
