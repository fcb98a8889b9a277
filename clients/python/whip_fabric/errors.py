"""Typed errors: one exception class per stable refusal code of the fabric.

Every error is a :class:`WhipError` with ``.code``, the server's stable snake_case code
(``not_member``, ``stale_fence``, ...), and ``.detail``, what the server said about it.
Refusals that carry numbers keep them as attributes (``StaleFence.presented`` and
``.current``, ``Contended.holders``).

Business outcomes are not errors: a contended lease (outside ``async with``), a counter
over its cap, a CAS version mismatch or an empty board are return values.

How the server sends a refusal: a refused board, mail, vote or work call answers with its
code in the response (``refusal`` / ``reason``); an access refusal is a gRPC status
(``PERMISSION_DENIED``, ``UNAUTHENTICATED``, ``INVALID_ARGUMENT``, ``NOT_FOUND``) whose
message starts with the code (``not_authorized: ...``); a call that found no leader in
time is ``UNAVAILABLE``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import grpc

__all__ = [
    "AnonymousRefused",
    "BoardFull",
    "ClaimExpired",
    "Contended",
    "Fatal",
    "InvalidArgument",
    "KeyReused",
    "NotAuthenticated",
    "NotAuthorized",
    "NotClaimed",
    "NotFound",
    "NotMember",
    "NotSupervisor",
    "OperatorOnly",
    "Refused",
    "Reserved",
    "ServerOnly",
    "StaleFence",
    "StaleWriter",
    "Superseded",
    "Taken",
    "TeamExists",
    "Unavailable",
    "UnknownTask",
    "UnknownTeam",
    "WhipError",
    "error_for",
    "from_rpc_error",
]


class WhipError(Exception):
    """A call the fabric refused or could not serve; ``code`` is its stable name."""

    code: str = "refused"

    def __init__(self, detail: str = "", *, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.detail = detail
        super().__init__(f"{self.code}: {detail}" if detail else self.code)


class Refused(WhipError):
    """A refusal whose code has no class of its own (``.code`` says which)."""


class NotAuthorized(WhipError):
    """The caller may not read or change this (it is another agent's)."""

    code = "not_authorized"


class NotAuthenticated(WhipError):
    """The caller did not prove who it is: no token, a wrong one, or a revoked agent."""

    code = "not_authenticated"


class NotMember(WhipError):
    """The caller is not a member of the team that owns this."""

    code = "not_member"


class NotSupervisor(WhipError):
    """Only the team's supervisor may do this."""

    code = "not_supervisor"


class Reserved(WhipError):
    """The key or resource is server state that no client reads or writes."""

    code = "reserved"


class OperatorOnly(WhipError):
    """The call needs the operator's credential."""

    code = "operator_only"


class ServerOnly(WhipError):
    """The command is sent only by nodes of the cluster."""

    code = "server_only"


class AnonymousRefused(WhipError):
    """The call needs a proven caller (an agent's token)."""

    code = "anonymous_refused"


class KeyReused(WhipError):
    """An idempotency key was used before by another request."""

    code = "key_reused"


class StaleFence(WhipError):
    """A fenced call presented a fence that is no longer current (the claim lapsed)."""

    code = "stale_fence"

    def __init__(
        self, detail: str = "", *, presented: int | None = None, current: int | None = None
    ) -> None:
        super().__init__(detail)
        found = _FENCES.search(detail)
        self.presented = presented if presented is not None else _group(found, 1)
        self.current = current if current is not None else _group(found, 2)


class StaleWriter(WhipError):
    """Another saver took the LangGraph thread over; this one must stop writing to it."""

    code = "stale_writer"


class ClaimExpired(StaleFence):
    """The claim's window passed before the call: its fence no longer holds."""

    code = "claim_expired"


class NotClaimed(WhipError):
    """The task is not claimed (it was released, completed or reclaimed)."""

    code = "not_claimed"


class UnknownTask(WhipError):
    """The board has no such task."""

    code = "unknown_task"


class UnknownTeam(WhipError):
    """No such team."""

    code = "unknown_team"


class TeamExists(WhipError):
    """A team of that name exists already."""

    code = "team_exists"


class BoardFull(WhipError):
    """The board holds as many tasks as it may."""

    code = "board_full"


class Taken(WhipError):
    """The named task is claimed by another worker."""

    code = "taken"


class Unavailable(WhipError):
    """No leader answered in time (after retries); the call may be retried as it was."""

    code = "unavailable"


class InvalidArgument(WhipError):
    """The request is malformed or out of bounds; retrying will not help."""

    code = "invalid_argument"


class NotFound(WhipError):
    """What the call names does not exist."""

    code = "not_found"


class Superseded(WhipError):
    """A later driver took the operation over."""

    code = "superseded"


class Fatal(WhipError):
    """The server's storage failed or it hit a bug."""

    code = "fatal"


@dataclass(frozen=True)
class Holder:
    """One holder of a lease slot."""

    holder: str
    fence: int
    expires_at_ms: int


class Contended(WhipError):
    """Every slot of the lease is held by others; ``holders`` says by whom."""

    code = "contended"

    def __init__(self, detail: str = "", *, holders: tuple[Holder, ...] = ()) -> None:
        super().__init__(detail)
        self.holders = holders


_FENCES = re.compile(r"fence (\d+) is stale, current is (\d+)")
_CODED = re.compile(r"^([a-z_]+): (.*)$", re.DOTALL)
_KEY_REUSED = "was used by another request"

_CLASSES: dict[str, type[WhipError]] = {
    cls.code: cls
    for cls in (
        NotAuthorized,
        NotAuthenticated,
        NotMember,
        NotSupervisor,
        Reserved,
        OperatorOnly,
        ServerOnly,
        AnonymousRefused,
        KeyReused,
        StaleFence,
        StaleWriter,
        ClaimExpired,
        NotClaimed,
        UnknownTask,
        UnknownTeam,
        TeamExists,
        BoardFull,
        Taken,
        Unavailable,
        InvalidArgument,
        NotFound,
        Superseded,
        Fatal,
        Contended,
    )
}

# A status without a code in its message: the code its gRPC status stands for.
_BY_STATUS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_argument",
    grpc.StatusCode.PERMISSION_DENIED: "not_authorized",
    grpc.StatusCode.UNAUTHENTICATED: "not_authenticated",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.ABORTED: "superseded",
    grpc.StatusCode.INTERNAL: "fatal",
}


def _group(found: re.Match[str] | None, index: int) -> int | None:
    return int(found.group(index)) if found else None


def error_for(code: str, detail: str = "") -> WhipError:
    """The exception for refusal ``code`` (a :class:`Refused` when it has no class)."""
    if detail.startswith(code + ": "):
        detail = detail[len(code) + 2 :]
    cls = _CLASSES.get(code)
    if cls is None:
        return Refused(detail, code=code or "refused")
    return cls(detail)


def split_code(message: str) -> tuple[str, str] | None:
    """``("not_member", "rest")`` for a message that starts with a stable code."""
    found = _CODED.match(message)
    return (found.group(1), found.group(2)) if found else None


def from_status(code: grpc.StatusCode, message: str) -> WhipError:
    """The typed error of a gRPC status the server answered."""
    if code == grpc.StatusCode.INVALID_ARGUMENT and _KEY_REUSED in message:
        return KeyReused(message)
    coded = split_code(message)
    if coded is not None and coded[0] in _CLASSES:
        return error_for(coded[0], coded[1])
    if code in _BY_STATUS:
        if coded is not None:
            return error_for(coded[0], coded[1])
        return error_for(_BY_STATUS[code], message)
    return Unavailable(message or code.name.lower())


def from_rpc_error(err: grpc.aio.AioRpcError) -> WhipError:
    """The typed error of a failed call."""
    return from_status(err.code(), err.details() or "")
