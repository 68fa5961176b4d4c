"""Deterministic, cluster-stable assignment of requests to exposure arms.

A request's arm is a pure function of its workspace, its cluster key and the
:class:`LiftConfig`; nothing random is involved, so serving code, replays and simulations in
any process agree on every arm.

Cluster key
    The first of: the artifact key; the trace id; when the request has a user message, the
    digest of the conversation's opening; the request id. Empty strings count as absent.
    The opening is every message up to and including the first ``user`` message, with the
    content of ``system`` (and ``developer``) messages replaced by ``null`` so that a system
    prompt embedding the current time does not split a conversation. Its digest is the
    SHA-256 hex of the UTF-8 of ``json.dumps([[role, content_or_null], ...],
    ensure_ascii=False, separators=(",", ":"))``. The digest only picks the bucket: it is
    never returned. A conversation is reported by a one-way token, ``"conv-"`` and eight hex
    digits of FNV-1a-32 over ``b"eval_pipelines.lift.conversation\\x00" + digest``, which
    groups the turns of one conversation (for a cluster bootstrap) without exposing the
    digest.

Buckets
    ``bucket = fnv1a_32(workspace_id + b"\\x00" + key) % 10_000`` (UTF-8), where ``key`` is the
    artifact key, trace id, request id, or the digest's hex for a conversation. A bucket below
    ``round(holdout_fraction * 10_000)`` is the standing holdout, whatever the lever. Outside
    it, with no lever the arm is ``pre_lever``; with a lever, a second bucket salted with the
    lever, ``fnv1a_32(workspace_id + b"\\x00" + lever + b"\\x00" + key) % 10_000``, below
    ``round(lever_holdout_share * 10_000)`` is ``lever_holdout`` and the rest ``treated``.
    The epoch is recorded with each assignment but is not hashed: changing the epoch alone
    moves nobody.

References
----------
.. [1] G. Fowler, L. C. Noll, K.-P. Vo, D. Eastlake, T. Hansen, "The FNV Non-Cryptographic
   Hash Algorithm", IETF draft-eastlake-fnv (FNV-1a, 32-bit offset basis and prime).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.arms import (
    ARMS,
    TEACHING_ARMS,
    ExposureArm,
    HoldoutFactNotRetrievableError,
    TeachingArm,
    artifact_arm,
    parse_arm,
    teaching_arm,
)
from eval_pipelines.core.lift.exemplars import ExemplarIndex

__all__ = [
    "ARMS",
    "BUCKETS",
    "DEFAULT_HOLDOUT_FRACTION",
    "FNV32_OFFSET",
    "FNV32_PRIME",
    "MAX_HOLDOUT_FRACTION",
    "MIN_HOLDOUT_FRACTION",
    "TEACHING_ARMS",
    "Assignment",
    "ClusterKey",
    "ExemplarIndex",
    "ExposureArm",
    "HoldoutFactNotRetrievableError",
    "LiftConfig",
    "Message",
    "Request",
    "TeachingArm",
    "artifact_arm",
    "assign",
    "assign_many",
    "bucket",
    "buckets",
    "check_fraction",
    "cluster_key",
    "fnv1a_32",
    "fnv1a_32_many",
    "parse_arm",
    "teaching_arm",
]

FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193
_MASK32 = 0xFFFFFFFF

BUCKETS = 10_000
DEFAULT_HOLDOUT_FRACTION = 0.10
MIN_HOLDOUT_FRACTION = 0.05
MAX_HOLDOUT_FRACTION = 0.30

# Roles whose content is masked in the conversation opening: they carry the system prompt.
_MASKED_ROLES = frozenset({"system", "developer"})
_CONVERSATION_TOKEN_DOMAIN = b"eval_pipelines.lift.conversation\x00"
# Once this few keys are still being hashed, the vectorised loop hands the rest of their bytes
# to the scalar loop, so one very long key does not cost a numpy round per byte.
_SCALAR_TAIL = 8


# --------------------------------------------------------------------------------------------
# FNV-1a, 32-bit
# --------------------------------------------------------------------------------------------


def _fnv1a_32_from(state: int, data: bytes) -> int:
    for byte in data:
        state = ((state ^ byte) * FNV32_PRIME) & _MASK32
    return state


def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a hash of a byte string [1]_."""
    return _fnv1a_32_from(FNV32_OFFSET, data)


def _fnv1a_32_many_from(state: int, keys: Sequence[bytes]) -> np.ndarray:
    n = len(keys)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    hashes = np.full(n, state, dtype=np.uint32)
    if n == 0 or not lengths.any():
        return hashes
    buffer = np.frombuffer(b"".join(keys), dtype=np.uint8)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    # Longest keys first, so the keys still being hashed at byte j are a prefix.
    order = np.argsort(-lengths, kind="stable")
    sorted_starts = starts[order]
    sorted_lengths = lengths[order]
    active = n - np.cumsum(np.bincount(lengths))  # active[j]: keys longer than j bytes
    h = hashes[order]
    prime = np.uint32(FNV32_PRIME)
    for j in range(int(sorted_lengths[0])):
        k = int(active[j])
        if k <= _SCALAR_TAIL:
            for row in range(k):
                start = int(sorted_starts[row])
                rest = buffer[start + j : start + int(sorted_lengths[row])].tobytes()
                h[row] = _fnv1a_32_from(int(h[row]), rest)
            break
        h[:k] ^= buffer[sorted_starts[:k] + j]
        h[:k] *= prime
    hashes[order] = h
    return hashes


def fnv1a_32_many(keys: Sequence[bytes]) -> np.ndarray:
    """:func:`fnv1a_32` of each key, vectorised over byte positions.

    Returns
    -------
    numpy.ndarray
        ``uint32``, one hash per key, equal to ``fnv1a_32(key)``. The work is proportional to
        the total number of bytes.
    """
    return _fnv1a_32_many_from(FNV32_OFFSET, keys)


# --------------------------------------------------------------------------------------------
# Buckets and fractions
# --------------------------------------------------------------------------------------------


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate (valid in JSON input) still hashes instead of raising.
    return text.encode("utf-8", "surrogatepass")


def check_fraction(fraction: float, *, field: str = "holdout_fraction") -> float:
    """The standing-holdout fraction as a float, refused outside the allowed band.

    Raises
    ------
    InputError
        When ``fraction`` is not a number in ``[0.05, 0.30]`` (bounds included).
    """
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, numbers.Real)
        or not MIN_HOLDOUT_FRACTION <= float(fraction) <= MAX_HOLDOUT_FRACTION
    ):
        raise InputError(
            field,
            fraction,
            f"must be a number in [{MIN_HOLDOUT_FRACTION:.2f}, {MAX_HOLDOUT_FRACTION:.2f}] "
            "(5% to 30% of traffic in the standing holdout)",
        )
    return float(fraction)


def _threshold(fraction: float) -> int:
    return round(fraction * BUCKETS)


def bucket(workspace_id: str, cluster_key: str) -> int:
    """The holdout bucket of a cluster key: ``fnv1a_32(workspace \\0 key) % BUCKETS``."""
    return fnv1a_32(_utf8(workspace_id) + b"\x00" + _utf8(cluster_key)) % BUCKETS


def _buckets_from(prefix: bytes, keys: Sequence[str]) -> np.ndarray:
    state = _fnv1a_32_from(FNV32_OFFSET, prefix)
    hashes = _fnv1a_32_many_from(state, [_utf8(key) for key in keys])
    return (hashes % np.uint32(BUCKETS)).astype(np.int64)


def buckets(workspace_id: str, cluster_keys: Sequence[str]) -> np.ndarray:
    """:func:`bucket` of each key, vectorised: ``int64``, one bucket per key."""
    return _buckets_from(_utf8(workspace_id) + b"\x00", cluster_keys)


# --------------------------------------------------------------------------------------------
# Requests and their cluster keys
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One chat message as the request carried it."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if not isinstance(self.role, str):
            raise InputError("role", self.role, "must be a string")
        if not isinstance(self.content, str):
            raise InputError("content", type(self.content).__name__, "must be a string")


def _optional_text(field: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise InputError(field, value, "must be a string or None")


@dataclass(frozen=True)
class Request:
    """What assignment needs to know about one request.

    Attributes
    ----------
    workspace_id
        The workspace the request belongs to (non-empty).
    artifact_key
        ``ur.artifact`` / ``X-UR-Artifact``; empty means absent.
    trace_id
        ``ur.trace_id``; empty means absent.
    messages
        The chat messages as sent (a client resends the whole history on every turn).
    request_id
        The request's own id, used only when it has no user message; empty means absent.
    """

    workspace_id: str
    artifact_key: str | None = None
    trace_id: str | None = None
    messages: tuple[Message, ...] = ()
    request_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.workspace_id, str) or not self.workspace_id:
            raise InputError("workspace_id", self.workspace_id, "must be a non-empty string")
        _optional_text("artifact_key", self.artifact_key)
        _optional_text("trace_id", self.trace_id)
        _optional_text("request_id", self.request_id)
        messages = tuple(self.messages)
        for position, message in enumerate(messages):
            if not isinstance(message, Message):
                raise InputError(
                    f"messages[{position}]", type(message).__name__, "must be a Message"
                )
        object.__setattr__(self, "messages", messages)


@dataclass(frozen=True)
class ClusterKey:
    """Which key a request was clustered on, in a form that may be stored and logged.

    Attributes
    ----------
    source
        ``"artifact"``, ``"trace"``, ``"conversation"`` or ``"request"``.
    token
        The artifact key, trace id or request id as given; for a conversation the one-way
        token ``conv-xxxxxxxx`` (never the digest itself).
    """

    source: str
    token: str


def _conversation_digest(messages: Sequence[Message]) -> str | None:
    opening: list[list[str | None]] = []
    for message in messages:
        masked = message.role in _MASKED_ROLES
        opening.append([message.role, None if masked else message.content])
        if message.role == "user":
            text = json.dumps(opening, ensure_ascii=False, separators=(",", ":"))
            return hashlib.sha256(_utf8(text)).hexdigest()
    return None


def _resolve(request: Request) -> tuple[ClusterKey, str]:
    """The reportable cluster key and the string that is hashed into the bucket."""
    if request.artifact_key:
        return ClusterKey("artifact", request.artifact_key), request.artifact_key
    if request.trace_id:
        return ClusterKey("trace", request.trace_id), request.trace_id
    digest = _conversation_digest(request.messages)
    if digest is not None:
        token = fnv1a_32(_CONVERSATION_TOKEN_DOMAIN + digest.encode("ascii"))
        return ClusterKey("conversation", f"conv-{token:08x}"), digest
    if request.request_id:
        return ClusterKey("request", request.request_id), request.request_id
    raise InputError(
        "request",
        f"workspace_id={request.workspace_id!r}",
        "nothing to key on: send an artifact key or a trace id, a user message, or a request id",
    )


def cluster_key(request: Request) -> ClusterKey:
    """The key that clusters ``request`` with its artifact, trace or conversation.

    Raises
    ------
    InputError
        When the request has no artifact key, trace id, user message or request id.
    """
    return _resolve(request)[0]


# --------------------------------------------------------------------------------------------
# Assignment
# --------------------------------------------------------------------------------------------


def _name(field: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or not value or "\x00" in value:
        rule = "must be a non-empty string without NUL bytes"
        raise InputError(field, value, rule + (" (None for no lever)" if optional else ""))


@dataclass(frozen=True)
class LiftConfig:
    """How one workspace's traffic is split, for one exposure epoch.

    Attributes
    ----------
    workspace_id
        The workspace the config belongs to.
    epoch
        The exposure epoch: change it whenever the holdout fraction or the lever split
        changes, so observations of two different splits are never pooled.
    holdout_fraction
        Share of traffic in the standing holdout, in ``[0.05, 0.30]``.
    lever
        The lever under live confirmation, or None while there is none (all non-holdout
        traffic is then ``pre_lever``).
    lever_holdout_share
        Share of the non-holdout traffic served the frozen baseline as ``lever_holdout``
        while a lever is confirmed, in ``(0, 1)``.
    """

    workspace_id: str
    epoch: str
    holdout_fraction: float = DEFAULT_HOLDOUT_FRACTION
    lever: str | None = None
    lever_holdout_share: float = 0.5

    def __post_init__(self) -> None:
        _name("workspace_id", self.workspace_id)
        _name("epoch", self.epoch)
        _name("lever", self.lever, optional=True)
        object.__setattr__(self, "holdout_fraction", check_fraction(self.holdout_fraction))
        share = self.lever_holdout_share
        if (
            isinstance(share, bool)
            or not isinstance(share, numbers.Real)
            or not math.isfinite(share)
            or not 0 < share < 1
        ):
            raise InputError("lever_holdout_share", share, "must be a number in (0, 1)")
        object.__setattr__(self, "lever_holdout_share", float(share))


@dataclass(frozen=True)
class Assignment:
    """The arm a request was stamped with, and what it was derived from.

    Attributes
    ----------
    arm
        The exposure arm.
    epoch
        The exposure epoch of the config that assigned it.
    cluster
        The cluster token (:attr:`ClusterKey.token`): requests sharing it share the arm.
    key_source
        :attr:`ClusterKey.source`.
    bucket
        The holdout bucket, ``0 <= bucket < BUCKETS``.
    """

    arm: ExposureArm
    epoch: str
    cluster: str
    key_source: str
    bucket: int


def _arm(config: LiftConfig, key: str, holdout_bucket: int) -> ExposureArm:
    """The scalar rule; :func:`_arm_codes` is its vectorised twin."""
    if holdout_bucket < _threshold(config.holdout_fraction):
        return ExposureArm.HOLDOUT
    if config.lever is None:
        return ExposureArm.PRE_LEVER
    salted = _utf8(config.workspace_id) + b"\x00" + _utf8(config.lever) + b"\x00" + _utf8(key)
    if fnv1a_32(salted) % BUCKETS < _threshold(config.lever_holdout_share):
        return ExposureArm.LEVER_HOLDOUT
    return ExposureArm.TREATED


def _arm_codes(config: LiftConfig, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    workspace = _utf8(config.workspace_id) + b"\x00"
    holdout_buckets = _buckets_from(workspace, keys)
    codes = np.full(len(keys), ARMS.index(ExposureArm.PRE_LEVER), dtype=np.int8)
    if config.lever is not None:
        lever_buckets = _buckets_from(workspace + _utf8(config.lever) + b"\x00", keys)
        lever_holdout = lever_buckets < _threshold(config.lever_holdout_share)
        codes[:] = ARMS.index(ExposureArm.TREATED)
        codes[lever_holdout] = ARMS.index(ExposureArm.LEVER_HOLDOUT)
    codes[holdout_buckets < _threshold(config.holdout_fraction)] = ARMS.index(ExposureArm.HOLDOUT)
    return codes, holdout_buckets


def assign(request: Request, config: LiftConfig) -> Assignment:
    """Stamp a request with its exposure arm.

    Raises
    ------
    InputError
        When the request belongs to another workspace than the config, or has nothing to
        key on.
    """
    if request.workspace_id != config.workspace_id:
        raise InputError(
            "workspace_id",
            request.workspace_id,
            f"must equal the config's workspace_id {config.workspace_id!r}",
        )
    key, hashed = _resolve(request)
    holdout_bucket = bucket(config.workspace_id, hashed)
    return Assignment(
        arm=_arm(config, hashed, holdout_bucket),
        epoch=config.epoch,
        cluster=key.token,
        key_source=key.source,
        bucket=holdout_bucket,
    )


def assign_many(workspace_id: str, cluster_keys: Sequence[str], config: LiftConfig) -> np.ndarray:
    """The arms of many cluster keys at once, as :func:`assign` would stamp them.

    Parameters
    ----------
    workspace_id
        Must equal ``config.workspace_id``.
    cluster_keys
        The hashed key strings: artifact keys, trace ids, request ids (a conversation's key is
        its digest, which only :func:`assign` sees).
    config
        The split.

    Returns
    -------
    numpy.ndarray
        ``int8`` arm codes, one per key: ``ARMS[code]`` is the arm.
    """
    if workspace_id != config.workspace_id:
        raise InputError(
            "workspace_id",
            workspace_id,
            f"must equal the config's workspace_id {config.workspace_id!r}",
        )
    return _arm_codes(config, cluster_keys)[0]
