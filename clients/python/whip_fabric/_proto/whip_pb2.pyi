from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutcomeCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[OutcomeCode]
    KV_WRITTEN: _ClassVar[OutcomeCode]
    KV_DELETED: _ClassVar[OutcomeCode]
    KV_VERSION_MISMATCH: _ClassVar[OutcomeCode]
    LEASE_HELD: _ClassVar[OutcomeCode]
    LEASE_CONTENDED: _ClassVar[OutcomeCode]
    LEASE_WAITING: _ClassVar[OutcomeCode]
    LEASE_RENEWED: _ClassVar[OutcomeCode]
    LEASE_RELEASED: _ClassVar[OutcomeCode]
    LEASE_NOT_HELD: _ClassVar[OutcomeCode]
    LEASE_RELEASED_ALL: _ClassVar[OutcomeCode]
    COUNTER_OK: _ClassVar[OutcomeCode]
    COUNTER_OVER: _ClassVar[OutcomeCode]
    LEDGER_APPENDED: _ClassVar[OutcomeCode]
    KV_TXN_COMMITTED: _ClassVar[OutcomeCode]
    KV_TXN_FAILED: _ClassVar[OutcomeCode]
    LEASE_HELD_DEGRADED: _ClassVar[OutcomeCode]
    ELECTED: _ClassVar[OutcomeCode]
    ELECTION_LOST: _ClassVar[OutcomeCode]
    ELECTION_NOT_LEADER: _ClassVar[OutcomeCode]
    PROCLAIMED: _ClassVar[OutcomeCode]
    RESIGNED: _ClassVar[OutcomeCode]
    SCHEDULE_FIRED: _ClassVar[OutcomeCode]
    SCHEDULE_ALREADY_FIRED: _ClassVar[OutcomeCode]
    SCHEDULE_NOT_DUE: _ClassVar[OutcomeCode]
    TEAM_CREATED: _ClassVar[OutcomeCode]
    TEAM_JOINED: _ClassVar[OutcomeCode]
    TEAM_DISSOLVED: _ClassVar[OutcomeCode]
    TASK_POSTED: _ClassVar[OutcomeCode]
    TASK_CLAIMED: _ClassVar[OutcomeCode]
    BOARD_EMPTY: _ClassVar[OutcomeCode]
    TASK_COMPLETED: _ClassVar[OutcomeCode]
    TASK_RELEASED: _ClassVar[OutcomeCode]
    TASK_DEAD_LETTERED: _ClassVar[OutcomeCode]
    TASK_EXTENDED: _ClassVar[OutcomeCode]
    TASK_REDRIVEN: _ClassVar[OutcomeCode]
    TASKS_CLAIMED: _ClassVar[OutcomeCode]
    BOARD_REFUSED: _ClassVar[OutcomeCode]
    KV_REFUSED: _ClassVar[OutcomeCode]
    KV_KEPT_ALIVE: _ClassVar[OutcomeCode]
    KV_TXN_DONE: _ClassVar[OutcomeCode]
    WORK_ADMITTED: _ClassVar[OutcomeCode]
    WORK_REFUSED: _ClassVar[OutcomeCode]
    WORK_RENEWED: _ClassVar[OutcomeCode]
    WORK_SIGNALLED: _ClassVar[OutcomeCode]
    WORK_SCOPED: _ClassVar[OutcomeCode]
    WORK_REVOKED: _ClassVar[OutcomeCode]
    MAIL_DELIVERED: _ClassVar[OutcomeCode]
    MAIL_REFUSED: _ClassVar[OutcomeCode]
    MAIL_ACKED: _ClassVar[OutcomeCode]
    MAIL_GRANTED: _ClassVar[OutcomeCode]
    MAIL_REVOKED: _ClassVar[OutcomeCode]
    MAIL_RELEASED: _ClassVar[OutcomeCode]
    MAIL_DROPPED: _ClassVar[OutcomeCode]
    MAIL_TAKEN: _ClassVar[OutcomeCode]
    ROLE_SET: _ClassVar[OutcomeCode]
    VOTE_OPENED: _ClassVar[OutcomeCode]
    VOTE_ACCEPTED: _ClassVar[OutcomeCode]
    VOTE_CLOSED: _ClassVar[OutcomeCode]
    VOTE_REFUSED: _ClassVar[OutcomeCode]
    PATHS_RESERVED: _ClassVar[OutcomeCode]
    PATHS_RELEASED: _ClassVar[OutcomeCode]
    PATHS_REFUSED: _ClassVar[OutcomeCode]

class KeySpace(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_SPACE_CLIENT: _ClassVar[KeySpace]
    KEY_SPACE_ENGINE: _ClassVar[KeySpace]

class KvCompareOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KV_COMPARE_EQUAL: _ClassVar[KvCompareOp]
    KV_COMPARE_NOT_EQUAL: _ClassVar[KvCompareOp]
    KV_COMPARE_LESS: _ClassVar[KvCompareOp]
    KV_COMPARE_GREATER: _ClassVar[KvCompareOp]

class Reset(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESET_UNSPECIFIED: _ClassVar[Reset]
    HOURLY: _ClassVar[Reset]
    DAILY: _ClassVar[Reset]
    WEEKLY: _ClassVar[Reset]
    MONTHLY: _ClassVar[Reset]

class MailType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MAIL_TYPE_UNSPECIFIED: _ClassVar[MailType]
    MAIL_TYPE_INFORM: _ClassVar[MailType]
    MAIL_TYPE_ASK: _ClassVar[MailType]
    MAIL_TYPE_REPLY: _ClassVar[MailType]
    MAIL_TYPE_DIRECTIVE: _ClassVar[MailType]
    MAIL_TYPE_NOTICE: _ClassVar[MailType]
OUTCOME_UNSPECIFIED: OutcomeCode
KV_WRITTEN: OutcomeCode
KV_DELETED: OutcomeCode
KV_VERSION_MISMATCH: OutcomeCode
LEASE_HELD: OutcomeCode
LEASE_CONTENDED: OutcomeCode
LEASE_WAITING: OutcomeCode
LEASE_RENEWED: OutcomeCode
LEASE_RELEASED: OutcomeCode
LEASE_NOT_HELD: OutcomeCode
LEASE_RELEASED_ALL: OutcomeCode
COUNTER_OK: OutcomeCode
COUNTER_OVER: OutcomeCode
LEDGER_APPENDED: OutcomeCode
KV_TXN_COMMITTED: OutcomeCode
KV_TXN_FAILED: OutcomeCode
LEASE_HELD_DEGRADED: OutcomeCode
ELECTED: OutcomeCode
ELECTION_LOST: OutcomeCode
ELECTION_NOT_LEADER: OutcomeCode
PROCLAIMED: OutcomeCode
RESIGNED: OutcomeCode
SCHEDULE_FIRED: OutcomeCode
SCHEDULE_ALREADY_FIRED: OutcomeCode
SCHEDULE_NOT_DUE: OutcomeCode
TEAM_CREATED: OutcomeCode
TEAM_JOINED: OutcomeCode
TEAM_DISSOLVED: OutcomeCode
TASK_POSTED: OutcomeCode
TASK_CLAIMED: OutcomeCode
BOARD_EMPTY: OutcomeCode
TASK_COMPLETED: OutcomeCode
TASK_RELEASED: OutcomeCode
TASK_DEAD_LETTERED: OutcomeCode
TASK_EXTENDED: OutcomeCode
TASK_REDRIVEN: OutcomeCode
TASKS_CLAIMED: OutcomeCode
BOARD_REFUSED: OutcomeCode
KV_REFUSED: OutcomeCode
KV_KEPT_ALIVE: OutcomeCode
KV_TXN_DONE: OutcomeCode
WORK_ADMITTED: OutcomeCode
WORK_REFUSED: OutcomeCode
WORK_RENEWED: OutcomeCode
WORK_SIGNALLED: OutcomeCode
WORK_SCOPED: OutcomeCode
WORK_REVOKED: OutcomeCode
MAIL_DELIVERED: OutcomeCode
MAIL_REFUSED: OutcomeCode
MAIL_ACKED: OutcomeCode
MAIL_GRANTED: OutcomeCode
MAIL_REVOKED: OutcomeCode
MAIL_RELEASED: OutcomeCode
MAIL_DROPPED: OutcomeCode
MAIL_TAKEN: OutcomeCode
ROLE_SET: OutcomeCode
VOTE_OPENED: OutcomeCode
VOTE_ACCEPTED: OutcomeCode
VOTE_CLOSED: OutcomeCode
VOTE_REFUSED: OutcomeCode
PATHS_RESERVED: OutcomeCode
PATHS_RELEASED: OutcomeCode
PATHS_REFUSED: OutcomeCode
KEY_SPACE_CLIENT: KeySpace
KEY_SPACE_ENGINE: KeySpace
KV_COMPARE_EQUAL: KvCompareOp
KV_COMPARE_NOT_EQUAL: KvCompareOp
KV_COMPARE_LESS: KvCompareOp
KV_COMPARE_GREATER: KvCompareOp
RESET_UNSPECIFIED: Reset
HOURLY: Reset
DAILY: Reset
WEEKLY: Reset
MONTHLY: Reset
MAIL_TYPE_UNSPECIFIED: MailType
MAIL_TYPE_INFORM: MailType
MAIL_TYPE_ASK: MailType
MAIL_TYPE_REPLY: MailType
MAIL_TYPE_DIRECTIVE: MailType
MAIL_TYPE_NOTICE: MailType

class ResourceId(_message.Message):
    __slots__ = ("owner", "name", "key")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    owner: str
    name: str
    key: str
    def __init__(self, owner: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class KvGetRequest(_message.Message):
    __slots__ = ("key", "space")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SPACE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    space: KeySpace
    def __init__(self, key: _Optional[bytes] = ..., space: _Optional[_Union[KeySpace, str]] = ...) -> None: ...

class KvGetResponse(_message.Message):
    __slots__ = ("found", "value", "version")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    version: int
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ...) -> None: ...

class KvPutRequest(_message.Message):
    __slots__ = ("key", "value", "expect_version", "idempotency_key", "ttl_ms", "lease", "lease_holder")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECT_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    LEASE_HOLDER_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    expect_version: int
    idempotency_key: str
    ttl_ms: int
    lease: ResourceId
    lease_holder: str
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., expect_version: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., lease: _Optional[_Union[ResourceId, _Mapping]] = ..., lease_holder: _Optional[str] = ...) -> None: ...

class KvKeepaliveRequest(_message.Message):
    __slots__ = ("key", "ttl_ms", "idempotency_key")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    ttl_ms: int
    idempotency_key: str
    def __init__(self, key: _Optional[bytes] = ..., ttl_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class KvDeleteRequest(_message.Message):
    __slots__ = ("key", "expect_version", "idempotency_key")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECT_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    expect_version: int
    idempotency_key: str
    def __init__(self, key: _Optional[bytes] = ..., expect_version: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class KvWriteResponse(_message.Message):
    __slots__ = ("code", "version", "fence", "current_version", "expires_at_ms", "refusal", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    version: int
    fence: int
    current_version: int
    expires_at_ms: int
    refusal: str
    message: str
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., version: _Optional[int] = ..., fence: _Optional[int] = ..., current_version: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., refusal: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class KvCompare(_message.Message):
    __slots__ = ("key", "expect_version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECT_VERSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    expect_version: int
    def __init__(self, key: _Optional[bytes] = ..., expect_version: _Optional[int] = ...) -> None: ...

class KvPair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class KvTxnRequest(_message.Message):
    __slots__ = ("compares", "puts", "deletes", "idempotency_key", "space")
    COMPARES_FIELD_NUMBER: _ClassVar[int]
    PUTS_FIELD_NUMBER: _ClassVar[int]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    SPACE_FIELD_NUMBER: _ClassVar[int]
    compares: _containers.RepeatedCompositeFieldContainer[KvCompare]
    puts: _containers.RepeatedCompositeFieldContainer[KvPair]
    deletes: _containers.RepeatedScalarFieldContainer[bytes]
    idempotency_key: str
    space: KeySpace
    def __init__(self, compares: _Optional[_Iterable[_Union[KvCompare, _Mapping]]] = ..., puts: _Optional[_Iterable[_Union[KvPair, _Mapping]]] = ..., deletes: _Optional[_Iterable[bytes]] = ..., idempotency_key: _Optional[str] = ..., space: _Optional[_Union[KeySpace, str]] = ...) -> None: ...

class KvTxnResponse(_message.Message):
    __slots__ = ("code", "fence", "failed_key", "current_version")
    CODE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    FAILED_KEY_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    fence: int
    failed_key: bytes
    current_version: int
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., fence: _Optional[int] = ..., failed_key: _Optional[bytes] = ..., current_version: _Optional[int] = ...) -> None: ...

class KvTxnCompare(_message.Message):
    __slots__ = ("key", "op", "version", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    op: KvCompareOp
    version: int
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., op: _Optional[_Union[KvCompareOp, str]] = ..., version: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class KvTxnOp(_message.Message):
    __slots__ = ("put", "delete", "get")
    PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    put: KvPair
    delete: bytes
    get: bytes
    def __init__(self, put: _Optional[_Union[KvPair, _Mapping]] = ..., delete: _Optional[bytes] = ..., get: _Optional[bytes] = ...) -> None: ...

class KvTxnIfRequest(_message.Message):
    __slots__ = ("compares", "success", "failure", "idempotency_key")
    COMPARES_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    compares: _containers.RepeatedCompositeFieldContainer[KvTxnCompare]
    success: _containers.RepeatedCompositeFieldContainer[KvTxnOp]
    failure: _containers.RepeatedCompositeFieldContainer[KvTxnOp]
    idempotency_key: str
    def __init__(self, compares: _Optional[_Iterable[_Union[KvTxnCompare, _Mapping]]] = ..., success: _Optional[_Iterable[_Union[KvTxnOp, _Mapping]]] = ..., failure: _Optional[_Iterable[_Union[KvTxnOp, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class KvTxnOpResult(_message.Message):
    __slots__ = ("put_version", "delete_version", "get")
    PUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    DELETE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    put_version: int
    delete_version: int
    get: KvGetResponse
    def __init__(self, put_version: _Optional[int] = ..., delete_version: _Optional[int] = ..., get: _Optional[_Union[KvGetResponse, _Mapping]] = ...) -> None: ...

class KvTxnIfResponse(_message.Message):
    __slots__ = ("code", "succeeded", "fence", "responses")
    CODE_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    succeeded: bool
    fence: int
    responses: _containers.RepeatedCompositeFieldContainer[KvTxnOpResult]
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., succeeded: _Optional[bool] = ..., fence: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[KvTxnOpResult, _Mapping]]] = ...) -> None: ...

class KvRangeRequest(_message.Message):
    __slots__ = ("prefix", "after_key", "limit", "space")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    AFTER_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SPACE_FIELD_NUMBER: _ClassVar[int]
    prefix: bytes
    after_key: bytes
    limit: int
    space: KeySpace
    def __init__(self, prefix: _Optional[bytes] = ..., after_key: _Optional[bytes] = ..., limit: _Optional[int] = ..., space: _Optional[_Union[KeySpace, str]] = ...) -> None: ...

class KvRangeEntry(_message.Message):
    __slots__ = ("key", "value", "version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    version: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ...) -> None: ...

class KvRangeResponse(_message.Message):
    __slots__ = ("entries", "resume_after")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[KvRangeEntry]
    resume_after: bytes
    def __init__(self, entries: _Optional[_Iterable[_Union[KvRangeEntry, _Mapping]]] = ..., resume_after: _Optional[bytes] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("key", "prefix", "from_revision", "cell")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    prefix: bool
    from_revision: int
    cell: int
    def __init__(self, key: _Optional[bytes] = ..., prefix: _Optional[bool] = ..., from_revision: _Optional[int] = ..., cell: _Optional[int] = ...) -> None: ...

class WaitAppliedRequest(_message.Message):
    __slots__ = ("board", "inbox", "lease", "key", "after_index", "timeout_ms")
    BOARD_FIELD_NUMBER: _ClassVar[int]
    INBOX_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    AFTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    board: str
    inbox: str
    lease: ResourceId
    key: bytes
    after_index: int
    timeout_ms: int
    def __init__(self, board: _Optional[str] = ..., inbox: _Optional[str] = ..., lease: _Optional[_Union[ResourceId, _Mapping]] = ..., key: _Optional[bytes] = ..., after_index: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WaitAppliedResponse(_message.Message):
    __slots__ = ("applied_index", "hosted")
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    HOSTED_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    hosted: bool
    def __init__(self, applied_index: _Optional[int] = ..., hosted: _Optional[bool] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("kind", "key", "value", "revision", "version")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[WatchEvent.Kind]
        PUT: _ClassVar[WatchEvent.Kind]
        DELETE: _ClassVar[WatchEvent.Kind]
    KIND_UNSPECIFIED: WatchEvent.Kind
    PUT: WatchEvent.Kind
    DELETE: WatchEvent.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: WatchEvent.Kind
    key: bytes
    value: bytes
    revision: int
    version: int
    def __init__(self, kind: _Optional[_Union[WatchEvent.Kind, str]] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., revision: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("events", "next_from", "compacted_below", "moved", "cell")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FROM_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_BELOW_FIELD_NUMBER: _ClassVar[int]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[WatchEvent]
    next_from: int
    compacted_below: int
    moved: bool
    cell: int
    def __init__(self, events: _Optional[_Iterable[_Union[WatchEvent, _Mapping]]] = ..., next_from: _Optional[int] = ..., compacted_below: _Optional[int] = ..., moved: _Optional[bool] = ..., cell: _Optional[int] = ...) -> None: ...

class LeaseHolder(_message.Message):
    __slots__ = ("holder", "fence", "expires_at_ms")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    holder: str
    fence: int
    expires_at_ms: int
    def __init__(self, holder: _Optional[str] = ..., fence: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class LeaseAcquireRequest(_message.Message):
    __slots__ = ("lease", "holder", "slots", "ttl_ms", "wait_ms", "idempotency_key", "fail_open")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    FAIL_OPEN_FIELD_NUMBER: _ClassVar[int]
    lease: ResourceId
    holder: str
    slots: int
    ttl_ms: int
    wait_ms: int
    idempotency_key: str
    fail_open: bool
    def __init__(self, lease: _Optional[_Union[ResourceId, _Mapping]] = ..., holder: _Optional[str] = ..., slots: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., wait_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., fail_open: _Optional[bool] = ...) -> None: ...

class LeaseRenewRequest(_message.Message):
    __slots__ = ("lease", "holder", "ttl_ms", "idempotency_key")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    lease: ResourceId
    holder: str
    ttl_ms: int
    idempotency_key: str
    def __init__(self, lease: _Optional[_Union[ResourceId, _Mapping]] = ..., holder: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class LeaseReleaseRequest(_message.Message):
    __slots__ = ("lease", "holder", "idempotency_key")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    lease: ResourceId
    holder: str
    idempotency_key: str
    def __init__(self, lease: _Optional[_Union[ResourceId, _Mapping]] = ..., holder: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class LeaseReleaseAllRequest(_message.Message):
    __slots__ = ("holder", "idempotency_key")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    holder: str
    idempotency_key: str
    def __init__(self, holder: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ("code", "fence", "expires_at_ms", "reentered", "holders", "position", "wait_until_ms", "released", "degraded_reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REENTERED_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    WAIT_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_REASON_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    fence: int
    expires_at_ms: int
    reentered: bool
    holders: _containers.RepeatedCompositeFieldContainer[LeaseHolder]
    position: int
    wait_until_ms: int
    released: int
    degraded_reason: str
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., fence: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., reentered: _Optional[bool] = ..., holders: _Optional[_Iterable[_Union[LeaseHolder, _Mapping]]] = ..., position: _Optional[int] = ..., wait_until_ms: _Optional[int] = ..., released: _Optional[int] = ..., degraded_reason: _Optional[str] = ...) -> None: ...

class LeaseListRequest(_message.Message):
    __slots__ = ("prefix", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class LeaseWaiter(_message.Message):
    __slots__ = ("holder", "wait_until_ms")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    WAIT_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    holder: str
    wait_until_ms: int
    def __init__(self, holder: _Optional[str] = ..., wait_until_ms: _Optional[int] = ...) -> None: ...

class LeaseView(_message.Message):
    __slots__ = ("lease", "slots", "holders", "waiters")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    lease: ResourceId
    slots: int
    holders: _containers.RepeatedCompositeFieldContainer[LeaseHolder]
    waiters: _containers.RepeatedCompositeFieldContainer[LeaseWaiter]
    def __init__(self, lease: _Optional[_Union[ResourceId, _Mapping]] = ..., slots: _Optional[int] = ..., holders: _Optional[_Iterable[_Union[LeaseHolder, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[LeaseWaiter, _Mapping]]] = ...) -> None: ...

class LeaseListResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseView]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseView, _Mapping]]] = ...) -> None: ...

class CounterConsumeRequest(_message.Message):
    __slots__ = ("counter", "amount", "cap", "reset", "timezone", "idempotency_key")
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    counter: ResourceId
    amount: int
    cap: int
    reset: Reset
    timezone: str
    idempotency_key: str
    def __init__(self, counter: _Optional[_Union[ResourceId, _Mapping]] = ..., amount: _Optional[int] = ..., cap: _Optional[int] = ..., reset: _Optional[_Union[Reset, str]] = ..., timezone: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CounterResponse(_message.Message):
    __slots__ = ("code", "consumed", "remaining", "period")
    CODE_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    consumed: int
    remaining: int
    period: str
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., consumed: _Optional[int] = ..., remaining: _Optional[int] = ..., period: _Optional[str] = ...) -> None: ...

class CounterListRequest(_message.Message):
    __slots__ = ("prefix", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class CounterView(_message.Message):
    __slots__ = ("counter", "consumed", "cap", "period")
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    counter: ResourceId
    consumed: int
    cap: int
    period: str
    def __init__(self, counter: _Optional[_Union[ResourceId, _Mapping]] = ..., consumed: _Optional[int] = ..., cap: _Optional[int] = ..., period: _Optional[str] = ...) -> None: ...

class CounterListResponse(_message.Message):
    __slots__ = ("counters",)
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    counters: _containers.RepeatedCompositeFieldContainer[CounterView]
    def __init__(self, counters: _Optional[_Iterable[_Union[CounterView, _Mapping]]] = ...) -> None: ...

class LedgerAppendRequest(_message.Message):
    __slots__ = ("ledger", "entry", "appended_by", "retain_ms", "idempotency_key")
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    APPENDED_BY_FIELD_NUMBER: _ClassVar[int]
    RETAIN_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ledger: ResourceId
    entry: bytes
    appended_by: str
    retain_ms: int
    idempotency_key: str
    def __init__(self, ledger: _Optional[_Union[ResourceId, _Mapping]] = ..., entry: _Optional[bytes] = ..., appended_by: _Optional[str] = ..., retain_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class LedgerAppendResponse(_message.Message):
    __slots__ = ("code", "seq")
    CODE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    seq: int
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., seq: _Optional[int] = ...) -> None: ...

class LedgerListRequest(_message.Message):
    __slots__ = ("owner", "name", "partition", "after_seq", "limit")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    owner: str
    name: str
    partition: str
    after_seq: int
    limit: int
    def __init__(self, owner: _Optional[str] = ..., name: _Optional[str] = ..., partition: _Optional[str] = ..., after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("ledger", "seq", "entry", "appended_by", "at_ms")
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    APPENDED_BY_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    ledger: ResourceId
    seq: int
    entry: bytes
    appended_by: str
    at_ms: int
    def __init__(self, ledger: _Optional[_Union[ResourceId, _Mapping]] = ..., seq: _Optional[int] = ..., entry: _Optional[bytes] = ..., appended_by: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class LedgerListResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("cell",)
    CELL_FIELD_NUMBER: _ClassVar[int]
    cell: int
    def __init__(self, cell: _Optional[int] = ...) -> None: ...

class MemberStatus(_message.Message):
    __slots__ = ("id", "addr", "voter", "matched_index", "lag")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    MATCHED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    id: int
    addr: str
    voter: bool
    matched_index: int
    lag: int
    def __init__(self, id: _Optional[int] = ..., addr: _Optional[str] = ..., voter: _Optional[bool] = ..., matched_index: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("id", "leader", "term", "members", "last_log_index", "last_applied", "state", "storage", "raft_refused", "stages", "hibernating", "hops")
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    RAFT_REFUSED_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    HIBERNATING_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    id: int
    leader: int
    term: int
    members: _containers.RepeatedCompositeFieldContainer[MemberStatus]
    last_log_index: int
    last_applied: int
    state: str
    storage: str
    raft_refused: int
    stages: _containers.RepeatedCompositeFieldContainer[StageLatency]
    hibernating: bool
    hops: _containers.RepeatedCompositeFieldContainer[StageHops]
    def __init__(self, id: _Optional[int] = ..., leader: _Optional[int] = ..., term: _Optional[int] = ..., members: _Optional[_Iterable[_Union[MemberStatus, _Mapping]]] = ..., last_log_index: _Optional[int] = ..., last_applied: _Optional[int] = ..., state: _Optional[str] = ..., storage: _Optional[str] = ..., raft_refused: _Optional[int] = ..., stages: _Optional[_Iterable[_Union[StageLatency, _Mapping]]] = ..., hibernating: _Optional[bool] = ..., hops: _Optional[_Iterable[_Union[StageHops, _Mapping]]] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("not_leader", "wrong_range", "refused")
    NOT_LEADER_FIELD_NUMBER: _ClassVar[int]
    WRONG_RANGE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    not_leader: NotLeaderDetail
    wrong_range: WrongRangeDetail
    refused: RefusedDetail
    def __init__(self, not_leader: _Optional[_Union[NotLeaderDetail, _Mapping]] = ..., wrong_range: _Optional[_Union[WrongRangeDetail, _Mapping]] = ..., refused: _Optional[_Union[RefusedDetail, _Mapping]] = ...) -> None: ...

class NotLeaderDetail(_message.Message):
    __slots__ = ("leader_addr",)
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    leader_addr: str
    def __init__(self, leader_addr: _Optional[str] = ...) -> None: ...

class WrongRangeDetail(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class RefusedDetail(_message.Message):
    __slots__ = ("code",)
    CODE_FIELD_NUMBER: _ClassVar[int]
    code: str
    def __init__(self, code: _Optional[str] = ...) -> None: ...

class StageLatency(_message.Message):
    __slots__ = ("stage", "count", "p50_us", "p90_us", "p99_us", "max_us")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    P50_US_FIELD_NUMBER: _ClassVar[int]
    P90_US_FIELD_NUMBER: _ClassVar[int]
    P99_US_FIELD_NUMBER: _ClassVar[int]
    MAX_US_FIELD_NUMBER: _ClassVar[int]
    stage: str
    count: int
    p50_us: int
    p90_us: int
    p99_us: int
    max_us: int
    def __init__(self, stage: _Optional[str] = ..., count: _Optional[int] = ..., p50_us: _Optional[int] = ..., p90_us: _Optional[int] = ..., p99_us: _Optional[int] = ..., max_us: _Optional[int] = ...) -> None: ...

class StageHops(_message.Message):
    __slots__ = ("stage", "samples", "thread_switches")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    THREAD_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    stage: str
    samples: int
    thread_switches: int
    def __init__(self, stage: _Optional[str] = ..., samples: _Optional[int] = ..., thread_switches: _Optional[int] = ...) -> None: ...

class ElectionLeader(_message.Message):
    __slots__ = ("group", "candidate", "fence", "endpoints", "expires_at_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    candidate: str
    fence: int
    endpoints: _containers.RepeatedScalarFieldContainer[str]
    expires_at_ms: int
    def __init__(self, group: _Optional[str] = ..., candidate: _Optional[str] = ..., fence: _Optional[int] = ..., endpoints: _Optional[_Iterable[str]] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ("group", "candidate", "endpoints", "ttl_ms", "idempotency_key")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    group: str
    candidate: str
    endpoints: _containers.RepeatedScalarFieldContainer[str]
    ttl_ms: int
    idempotency_key: str
    def __init__(self, group: _Optional[str] = ..., candidate: _Optional[str] = ..., endpoints: _Optional[_Iterable[str]] = ..., ttl_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ElectionTermRequest(_message.Message):
    __slots__ = ("group", "candidate", "fence", "endpoints", "ttl_ms", "idempotency_key")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    group: str
    candidate: str
    fence: int
    endpoints: _containers.RepeatedScalarFieldContainer[str]
    ttl_ms: int
    idempotency_key: str
    def __init__(self, group: _Optional[str] = ..., candidate: _Optional[str] = ..., fence: _Optional[int] = ..., endpoints: _Optional[_Iterable[str]] = ..., ttl_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ElectionResponse(_message.Message):
    __slots__ = ("code", "fence", "expires_at_ms", "leader")
    CODE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    fence: int
    expires_at_ms: int
    leader: ElectionLeader
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., fence: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., leader: _Optional[_Union[ElectionLeader, _Mapping]] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: ElectionLeader
    def __init__(self, leader: _Optional[_Union[ElectionLeader, _Mapping]] = ...) -> None: ...

class ScheduleFireRequest(_message.Message):
    __slots__ = ("name", "spec", "timezone", "due_ms", "claimant", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    DUE_MS_FIELD_NUMBER: _ClassVar[int]
    CLAIMANT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    spec: str
    timezone: str
    due_ms: int
    claimant: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., spec: _Optional[str] = ..., timezone: _Optional[str] = ..., due_ms: _Optional[int] = ..., claimant: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ScheduleResponse(_message.Message):
    __slots__ = ("code", "due_ms", "fence", "claimant")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DUE_MS_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    CLAIMANT_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    due_ms: int
    fence: int
    claimant: str
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., due_ms: _Optional[int] = ..., fence: _Optional[int] = ..., claimant: _Optional[str] = ...) -> None: ...

class AgentRegisterRequest(_message.Message):
    __slots__ = ("agent", "token", "enroll")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENROLL_FIELD_NUMBER: _ClassVar[int]
    agent: str
    token: str
    enroll: bool
    def __init__(self, agent: _Optional[str] = ..., token: _Optional[str] = ..., enroll: _Optional[bool] = ...) -> None: ...

class AgentRegisterResponse(_message.Message):
    __slots__ = ("created", "token")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    created: bool
    token: str
    def __init__(self, created: _Optional[bool] = ..., token: _Optional[str] = ...) -> None: ...

class BoardSettings(_message.Message):
    __slots__ = ("reclaim_ms", "delivery_limit", "spill_after_ms", "task_bytes_max")
    RECLAIM_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SPILL_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    TASK_BYTES_MAX_FIELD_NUMBER: _ClassVar[int]
    reclaim_ms: int
    delivery_limit: int
    spill_after_ms: int
    task_bytes_max: int
    def __init__(self, reclaim_ms: _Optional[int] = ..., delivery_limit: _Optional[int] = ..., spill_after_ms: _Optional[int] = ..., task_bytes_max: _Optional[int] = ...) -> None: ...

class TeamCreateRequest(_message.Message):
    __slots__ = ("team", "parent", "settings", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    parent: str
    settings: BoardSettings
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., parent: _Optional[str] = ..., settings: _Optional[_Union[BoardSettings, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TeamJoinRequest(_message.Message):
    __slots__ = ("team", "agent", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    agent: str
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., agent: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TeamDissolveRequest(_message.Message):
    __slots__ = ("team", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TeamResponse(_message.Message):
    __slots__ = ("code", "refusal", "message", "removed", "done")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    refusal: str
    message: str
    removed: int
    done: bool
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., refusal: _Optional[str] = ..., message: _Optional[str] = ..., removed: _Optional[int] = ..., done: _Optional[bool] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("delivery", "worker", "error", "at_ms")
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    delivery: int
    worker: str
    error: str
    at_ms: int
    def __init__(self, delivery: _Optional[int] = ..., worker: _Optional[str] = ..., error: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "team", "tier", "state", "body", "delivery_count", "worker", "fence", "deadline_ms", "posted_ms", "failures", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    POSTED_MS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    team: str
    tier: str
    state: str
    body: bytes
    delivery_count: int
    worker: str
    fence: int
    deadline_ms: int
    posted_ms: int
    failures: _containers.RepeatedCompositeFieldContainer[Failure]
    result: bytes
    def __init__(self, id: _Optional[str] = ..., team: _Optional[str] = ..., tier: _Optional[str] = ..., state: _Optional[str] = ..., body: _Optional[bytes] = ..., delivery_count: _Optional[int] = ..., worker: _Optional[str] = ..., fence: _Optional[int] = ..., deadline_ms: _Optional[int] = ..., posted_ms: _Optional[int] = ..., failures: _Optional[_Iterable[_Union[Failure, _Mapping]]] = ..., result: _Optional[bytes] = ...) -> None: ...

class BoardPostRequest(_message.Message):
    __slots__ = ("team", "body", "idempotency_key", "bodies")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BODIES_FIELD_NUMBER: _ClassVar[int]
    team: str
    body: bytes
    idempotency_key: str
    bodies: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, team: _Optional[str] = ..., body: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., bodies: _Optional[_Iterable[bytes]] = ...) -> None: ...

class BoardClaimRequest(_message.Message):
    __slots__ = ("team", "worker", "idempotency_key", "task_id", "claim_ms", "max", "completes")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    COMPLETES_FIELD_NUMBER: _ClassVar[int]
    team: str
    worker: str
    idempotency_key: str
    task_id: str
    claim_ms: int
    max: int
    completes: _containers.RepeatedCompositeFieldContainer[BoardCompletion]
    def __init__(self, team: _Optional[str] = ..., worker: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., task_id: _Optional[str] = ..., claim_ms: _Optional[int] = ..., max: _Optional[int] = ..., completes: _Optional[_Iterable[_Union[BoardCompletion, _Mapping]]] = ...) -> None: ...

class BoardCompletion(_message.Message):
    __slots__ = ("task_id", "fence", "result")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    fence: int
    result: bytes
    def __init__(self, task_id: _Optional[str] = ..., fence: _Optional[int] = ..., result: _Optional[bytes] = ...) -> None: ...

class BoardTaskRequest(_message.Message):
    __slots__ = ("team", "task_id", "fence", "result", "error", "extend_ms", "idempotency_key", "claim_next", "worker")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXTEND_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NEXT_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    team: str
    task_id: str
    fence: int
    result: bytes
    error: str
    extend_ms: int
    idempotency_key: str
    claim_next: bool
    worker: str
    def __init__(self, team: _Optional[str] = ..., task_id: _Optional[str] = ..., fence: _Optional[int] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., extend_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., claim_next: _Optional[bool] = ..., worker: _Optional[str] = ...) -> None: ...

class BoardResponse(_message.Message):
    __slots__ = ("code", "refusal", "message", "task_id", "tier", "task", "fence", "deadline_ms", "delivery_count", "task_ids", "claims", "completed")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    code: OutcomeCode
    refusal: str
    message: str
    task_id: str
    tier: str
    task: Task
    fence: int
    deadline_ms: int
    delivery_count: int
    task_ids: _containers.RepeatedScalarFieldContainer[str]
    claims: _containers.RepeatedCompositeFieldContainer[Task]
    completed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, code: _Optional[_Union[OutcomeCode, str]] = ..., refusal: _Optional[str] = ..., message: _Optional[str] = ..., task_id: _Optional[str] = ..., tier: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., fence: _Optional[int] = ..., deadline_ms: _Optional[int] = ..., delivery_count: _Optional[int] = ..., task_ids: _Optional[_Iterable[str]] = ..., claims: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., completed: _Optional[_Iterable[str]] = ...) -> None: ...

class BoardListRequest(_message.Message):
    __slots__ = ("team", "state", "limit")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    team: str
    state: str
    limit: int
    def __init__(self, team: _Optional[str] = ..., state: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class BoardListResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class BoardGetRequest(_message.Message):
    __slots__ = ("team", "task_id")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    team: str
    task_id: str
    def __init__(self, team: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class BoardStatsRequest(_message.Message):
    __slots__ = ("team",)
    TEAM_FIELD_NUMBER: _ClassVar[int]
    team: str
    def __init__(self, team: _Optional[str] = ...) -> None: ...

class BoardStatsResponse(_message.Message):
    __slots__ = ("ready", "claimed", "done", "dead", "tier", "cell_ready")
    READY_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CELL_READY_FIELD_NUMBER: _ClassVar[int]
    ready: int
    claimed: int
    done: int
    dead: int
    tier: str
    cell_ready: int
    def __init__(self, ready: _Optional[int] = ..., claimed: _Optional[int] = ..., done: _Optional[int] = ..., dead: _Optional[int] = ..., tier: _Optional[str] = ..., cell_ready: _Optional[int] = ...) -> None: ...

class MailboxRequest(_message.Message):
    __slots__ = ("team", "after_seq", "limit")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    team: str
    after_seq: int
    limit: int
    def __init__(self, team: _Optional[str] = ..., after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class MailboxMessage(_message.Message):
    __slots__ = ("seq", "kind", "body", "at_ms")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    kind: str
    body: bytes
    at_ms: int
    def __init__(self, seq: _Optional[int] = ..., kind: _Optional[str] = ..., body: _Optional[bytes] = ..., at_ms: _Optional[int] = ..., **kwargs) -> None: ...

class MailboxResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MailboxMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[MailboxMessage, _Mapping]]] = ...) -> None: ...

class SignalPublishRequest(_message.Message):
    __slots__ = ("team", "topic", "body", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    topic: str
    body: bytes
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., topic: _Optional[str] = ..., body: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SignalSubscribeRequest(_message.Message):
    __slots__ = ("team", "topic", "after_seq")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    team: str
    topic: str
    after_seq: int
    def __init__(self, team: _Optional[str] = ..., topic: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WorkEntry(_message.Message):
    __slots__ = ("id", "kind", "owner", "parent", "lineage", "depth", "signal", "created_ms", "expires_ms", "children", "budget")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    owner: str
    parent: str
    lineage: _containers.RepeatedScalarFieldContainer[str]
    depth: int
    signal: str
    created_ms: int
    expires_ms: int
    children: int
    budget: int
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., owner: _Optional[str] = ..., parent: _Optional[str] = ..., lineage: _Optional[_Iterable[str]] = ..., depth: _Optional[int] = ..., signal: _Optional[str] = ..., created_ms: _Optional[int] = ..., expires_ms: _Optional[int] = ..., children: _Optional[int] = ..., budget: _Optional[int] = ..., **kwargs) -> None: ...

class WorkRegisterRequest(_message.Message):
    __slots__ = ("kind", "parent", "ttl_ms", "owner", "idempotency_key")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    parent: str
    ttl_ms: int
    owner: str
    idempotency_key: str
    def __init__(self, kind: _Optional[str] = ..., parent: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., owner: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., **kwargs) -> None: ...

class WorkRenewRequest(_message.Message):
    __slots__ = ("id", "ttl_ms", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    ttl_ms: int
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WorkSignalRequest(_message.Message):
    __slots__ = ("id", "signal", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    signal: str
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., signal: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WorkRevokeRequest(_message.Message):
    __slots__ = ("id", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WorkScopeRequest(_message.Message):
    __slots__ = ("id", "budget", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    budget: int
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., budget: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., **kwargs) -> None: ...

class WorkResponse(_message.Message):
    __slots__ = ("outcome", "entry", "peers", "limit", "reason", "max", "current", "signal", "signal_reason", "expires_ms", "removed", "revoked_agents", "budget", "code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_REASON_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AGENTS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    entry: WorkEntry
    peers: _containers.RepeatedScalarFieldContainer[str]
    limit: str
    reason: str
    max: int
    current: int
    signal: str
    signal_reason: str
    expires_ms: int
    removed: int
    revoked_agents: _containers.RepeatedScalarFieldContainer[str]
    budget: int
    code: OutcomeCode
    def __init__(self, outcome: _Optional[str] = ..., entry: _Optional[_Union[WorkEntry, _Mapping]] = ..., peers: _Optional[_Iterable[str]] = ..., limit: _Optional[str] = ..., reason: _Optional[str] = ..., max: _Optional[int] = ..., current: _Optional[int] = ..., signal: _Optional[str] = ..., signal_reason: _Optional[str] = ..., expires_ms: _Optional[int] = ..., removed: _Optional[int] = ..., revoked_agents: _Optional[_Iterable[str]] = ..., budget: _Optional[int] = ..., code: _Optional[_Union[OutcomeCode, str]] = ..., **kwargs) -> None: ...

class WorkListRequest(_message.Message):
    __slots__ = ("parent", "limit")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    limit: int
    def __init__(self, parent: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class WorkListResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[WorkEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[WorkEntry, _Mapping]]] = ...) -> None: ...

class WorkLimitsRequest(_message.Message):
    __slots__ = ("fabric_max", "cell_max", "depth_max", "children_max", "classes", "idempotency_key", "owner_max")
    class ClassesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    FABRIC_MAX_FIELD_NUMBER: _ClassVar[int]
    CELL_MAX_FIELD_NUMBER: _ClassVar[int]
    DEPTH_MAX_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_MAX_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    OWNER_MAX_FIELD_NUMBER: _ClassVar[int]
    fabric_max: int
    cell_max: int
    depth_max: int
    children_max: int
    classes: _containers.ScalarMap[str, int]
    idempotency_key: str
    owner_max: int
    def __init__(self, fabric_max: _Optional[int] = ..., cell_max: _Optional[int] = ..., depth_max: _Optional[int] = ..., children_max: _Optional[int] = ..., classes: _Optional[_Mapping[str, int]] = ..., idempotency_key: _Optional[str] = ..., owner_max: _Optional[int] = ...) -> None: ...

class WorkLimitsResponse(_message.Message):
    __slots__ = ("fabric_max", "cell_max", "depth_max", "children_max", "classes", "owner_max")
    class ClassesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    FABRIC_MAX_FIELD_NUMBER: _ClassVar[int]
    CELL_MAX_FIELD_NUMBER: _ClassVar[int]
    DEPTH_MAX_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_MAX_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    OWNER_MAX_FIELD_NUMBER: _ClassVar[int]
    fabric_max: int
    cell_max: int
    depth_max: int
    children_max: int
    classes: _containers.ScalarMap[str, int]
    owner_max: int
    def __init__(self, fabric_max: _Optional[int] = ..., cell_max: _Optional[int] = ..., depth_max: _Optional[int] = ..., children_max: _Optional[int] = ..., classes: _Optional[_Mapping[str, int]] = ..., owner_max: _Optional[int] = ...) -> None: ...

class WorkAuditRequest(_message.Message):
    __slots__ = ("after_seq", "limit")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    limit: int
    def __init__(self, after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class AuditRow(_message.Message):
    __slots__ = ("seq", "time_ms", "actor", "action", "target", "outcome", "detail", "cell")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time_ms: int
    actor: str
    action: str
    target: str
    outcome: str
    detail: str
    cell: int
    def __init__(self, seq: _Optional[int] = ..., time_ms: _Optional[int] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ..., cell: _Optional[int] = ...) -> None: ...

class WorkAuditResponse(_message.Message):
    __slots__ = ("rows",)
    ROWS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[AuditRow]
    def __init__(self, rows: _Optional[_Iterable[_Union[AuditRow, _Mapping]]] = ...) -> None: ...

class MailSendRequest(_message.Message):
    __slots__ = ("to", "type", "text", "payload", "in_reply_to", "thread", "idempotency_key", "reply_to")
    TO_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    IN_REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    type: MailType
    text: str
    payload: str
    in_reply_to: str
    thread: str
    idempotency_key: str
    reply_to: str
    def __init__(self, to: _Optional[str] = ..., type: _Optional[_Union[MailType, str]] = ..., text: _Optional[str] = ..., payload: _Optional[str] = ..., in_reply_to: _Optional[str] = ..., thread: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., reply_to: _Optional[str] = ...) -> None: ...

class MailSendManyRequest(_message.Message):
    __slots__ = ("to", "messages", "idempotency_key")
    TO_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    to: str
    messages: _containers.RepeatedCompositeFieldContainer[MailSendItem]
    idempotency_key: str
    def __init__(self, to: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[MailSendItem, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class MailSendItem(_message.Message):
    __slots__ = ("type", "text", "payload", "in_reply_to", "thread", "reply_to")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    IN_REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    type: MailType
    text: str
    payload: str
    in_reply_to: str
    thread: str
    reply_to: str
    def __init__(self, type: _Optional[_Union[MailType, str]] = ..., text: _Optional[str] = ..., payload: _Optional[str] = ..., in_reply_to: _Optional[str] = ..., thread: _Optional[str] = ..., reply_to: _Optional[str] = ...) -> None: ...

class MailSendManyResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MailSendResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[MailSendResponse, _Mapping]]] = ...) -> None: ...

class MailSendResponse(_message.Message):
    __slots__ = ("outcome", "id", "trust", "reason", "message", "code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    id: str
    trust: str
    reason: str
    message: str
    code: OutcomeCode
    def __init__(self, outcome: _Optional[str] = ..., id: _Optional[str] = ..., trust: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., code: _Optional[_Union[OutcomeCode, str]] = ...) -> None: ...

class MailFinding(_message.Message):
    __slots__ = ("kind", "detail")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    kind: str
    detail: str
    def __init__(self, kind: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class MailScreen(_message.Message):
    __slots__ = ("verdict", "findings", "rules_version")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    RULES_VERSION_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    findings: _containers.RepeatedCompositeFieldContainer[MailFinding]
    rules_version: int
    def __init__(self, verdict: _Optional[str] = ..., findings: _Optional[_Iterable[_Union[MailFinding, _Mapping]]] = ..., rules_version: _Optional[int] = ...) -> None: ...

class MailMessage(_message.Message):
    __slots__ = ("id", "seq", "to", "type", "text", "payload", "in_reply_to", "thread", "trust", "screen", "at_ms", "released_by", "reply_to")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    IN_REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_BY_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    id: str
    seq: int
    to: str
    type: MailType
    text: str
    payload: str
    in_reply_to: str
    thread: str
    trust: str
    screen: MailScreen
    at_ms: int
    released_by: str
    reply_to: str
    def __init__(self, id: _Optional[str] = ..., seq: _Optional[int] = ..., to: _Optional[str] = ..., type: _Optional[_Union[MailType, str]] = ..., text: _Optional[str] = ..., payload: _Optional[str] = ..., in_reply_to: _Optional[str] = ..., thread: _Optional[str] = ..., trust: _Optional[str] = ..., screen: _Optional[_Union[MailScreen, _Mapping]] = ..., at_ms: _Optional[int] = ..., released_by: _Optional[str] = ..., reply_to: _Optional[str] = ..., **kwargs) -> None: ...

class MailInboxRequest(_message.Message):
    __slots__ = ("address", "after_seq", "limit", "quarantined")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    address: str
    after_seq: int
    limit: int
    quarantined: bool
    def __init__(self, address: _Optional[str] = ..., after_seq: _Optional[int] = ..., limit: _Optional[int] = ..., quarantined: _Optional[bool] = ...) -> None: ...

class MailInboxResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MailMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[MailMessage, _Mapping]]] = ...) -> None: ...

class MailAckRequest(_message.Message):
    __slots__ = ("address", "through_seq", "idempotency_key")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQ_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    address: str
    through_seq: int
    idempotency_key: str
    def __init__(self, address: _Optional[str] = ..., through_seq: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class MailTakeRequest(_message.Message):
    __slots__ = ("address", "ack_through", "max", "visibility_ms", "idempotency_key")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ACK_THROUGH_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    address: str
    ack_through: int
    max: int
    visibility_ms: int
    idempotency_key: str
    def __init__(self, address: _Optional[str] = ..., ack_through: _Optional[int] = ..., max: _Optional[int] = ..., visibility_ms: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class MailTakeResponse(_message.Message):
    __slots__ = ("outcome", "reason", "message", "code", "removed", "messages", "visible_until_ms")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    reason: str
    message: str
    code: OutcomeCode
    removed: int
    messages: _containers.RepeatedCompositeFieldContainer[MailMessage]
    visible_until_ms: int
    def __init__(self, outcome: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., code: _Optional[_Union[OutcomeCode, str]] = ..., removed: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[MailMessage, _Mapping]]] = ..., visible_until_ms: _Optional[int] = ...) -> None: ...

class MailGrantRequest(_message.Message):
    __slots__ = ("address", "sender", "allow", "idempotency_key")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    address: str
    sender: str
    allow: bool
    idempotency_key: str
    def __init__(self, address: _Optional[str] = ..., sender: _Optional[str] = ..., allow: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class MailReleaseRequest(_message.Message):
    __slots__ = ("id", "deliver", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    DELIVER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    deliver: bool
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., deliver: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class MailResponse(_message.Message):
    __slots__ = ("outcome", "reason", "message", "removed", "id", "code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    reason: str
    message: str
    removed: int
    id: str
    code: OutcomeCode
    def __init__(self, outcome: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., removed: _Optional[int] = ..., id: _Optional[str] = ..., code: _Optional[_Union[OutcomeCode, str]] = ...) -> None: ...

class TeamRoleRequest(_message.Message):
    __slots__ = ("team", "member", "role", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    member: str
    role: str
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., member: _Optional[str] = ..., role: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class VoteOpenRequest(_message.Message):
    __slots__ = ("team", "title", "options", "method", "electorate", "quorum", "threshold", "duration_ms", "until_all_voted", "idempotency_key")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    ELECTORATE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_ALL_VOTED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    team: str
    title: str
    options: _containers.RepeatedScalarFieldContainer[str]
    method: str
    electorate: _containers.RepeatedScalarFieldContainer[str]
    quorum: str
    threshold: str
    duration_ms: int
    until_all_voted: bool
    idempotency_key: str
    def __init__(self, team: _Optional[str] = ..., title: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., method: _Optional[str] = ..., electorate: _Optional[_Iterable[str]] = ..., quorum: _Optional[str] = ..., threshold: _Optional[str] = ..., duration_ms: _Optional[int] = ..., until_all_voted: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class VoteCastRequest(_message.Message):
    __slots__ = ("proposal", "choice", "idempotency_key")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    proposal: str
    choice: _containers.RepeatedScalarFieldContainer[str]
    idempotency_key: str
    def __init__(self, proposal: _Optional[str] = ..., choice: _Optional[_Iterable[str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class VoteCloseRequest(_message.Message):
    __slots__ = ("proposal", "idempotency_key")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    proposal: str
    idempotency_key: str
    def __init__(self, proposal: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("outcome", "proposal", "seq", "reason", "message", "closes_at_ms", "electorate", "result", "winner", "closed", "code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CLOSES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ELECTORATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    proposal: str
    seq: int
    reason: str
    message: str
    closes_at_ms: int
    electorate: int
    result: str
    winner: str
    closed: bool
    code: OutcomeCode
    def __init__(self, outcome: _Optional[str] = ..., proposal: _Optional[str] = ..., seq: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., closes_at_ms: _Optional[int] = ..., electorate: _Optional[int] = ..., result: _Optional[str] = ..., winner: _Optional[str] = ..., closed: _Optional[bool] = ..., code: _Optional[_Union[OutcomeCode, str]] = ...) -> None: ...

class VoteRow(_message.Message):
    __slots__ = ("cells",)
    CELLS_FIELD_NUMBER: _ClassVar[int]
    cells: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, cells: _Optional[_Iterable[int]] = ...) -> None: ...

class VoteRound(_message.Message):
    __slots__ = ("kind", "counts", "matrix", "eliminated", "exhausted")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    MATRIX_FIELD_NUMBER: _ClassVar[int]
    ELIMINATED_FIELD_NUMBER: _ClassVar[int]
    EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    kind: str
    counts: _containers.RepeatedScalarFieldContainer[int]
    matrix: _containers.RepeatedCompositeFieldContainer[VoteRow]
    eliminated: int
    exhausted: int
    def __init__(self, kind: _Optional[str] = ..., counts: _Optional[_Iterable[int]] = ..., matrix: _Optional[_Iterable[_Union[VoteRow, _Mapping]]] = ..., eliminated: _Optional[int] = ..., exhausted: _Optional[int] = ...) -> None: ...

class VoteResult(_message.Message):
    __slots__ = ("closed_at_ms", "reason", "electorate", "voters", "outcome", "winner", "leader", "support", "base", "rounds")
    CLOSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ELECTORATE_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    closed_at_ms: int
    reason: str
    electorate: int
    voters: int
    outcome: str
    winner: int
    leader: int
    support: int
    base: int
    rounds: _containers.RepeatedCompositeFieldContainer[VoteRound]
    def __init__(self, closed_at_ms: _Optional[int] = ..., reason: _Optional[str] = ..., electorate: _Optional[int] = ..., voters: _Optional[int] = ..., outcome: _Optional[str] = ..., winner: _Optional[int] = ..., leader: _Optional[int] = ..., support: _Optional[int] = ..., base: _Optional[int] = ..., rounds: _Optional[_Iterable[_Union[VoteRound, _Mapping]]] = ...) -> None: ...

class VoteProposal(_message.Message):
    __slots__ = ("id", "team", "opener", "title", "options", "method", "roles", "quorum", "threshold", "duration_ms", "until_all_voted", "electorate", "opened_at_ms", "closes_at_ms", "state", "ballots", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    OPENER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_ALL_VOTED_FIELD_NUMBER: _ClassVar[int]
    ELECTORATE_FIELD_NUMBER: _ClassVar[int]
    OPENED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BALLOTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    team: str
    opener: str
    title: str
    options: _containers.RepeatedScalarFieldContainer[str]
    method: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    quorum: str
    threshold: str
    duration_ms: int
    until_all_voted: bool
    electorate: _containers.RepeatedScalarFieldContainer[str]
    opened_at_ms: int
    closes_at_ms: int
    state: str
    ballots: int
    result: VoteResult
    def __init__(self, id: _Optional[str] = ..., team: _Optional[str] = ..., opener: _Optional[str] = ..., title: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., method: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., quorum: _Optional[str] = ..., threshold: _Optional[str] = ..., duration_ms: _Optional[int] = ..., until_all_voted: _Optional[bool] = ..., electorate: _Optional[_Iterable[str]] = ..., opened_at_ms: _Optional[int] = ..., closes_at_ms: _Optional[int] = ..., state: _Optional[str] = ..., ballots: _Optional[int] = ..., result: _Optional[_Union[VoteResult, _Mapping]] = ...) -> None: ...

class VoteShowRequest(_message.Message):
    __slots__ = ("proposal",)
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    proposal: str
    def __init__(self, proposal: _Optional[str] = ...) -> None: ...

class VoteShowResponse(_message.Message):
    __slots__ = ("proposal",)
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    proposal: VoteProposal
    def __init__(self, proposal: _Optional[_Union[VoteProposal, _Mapping]] = ...) -> None: ...

class VoteBallotsRequest(_message.Message):
    __slots__ = ("proposal", "after_seq", "limit")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    proposal: str
    after_seq: int
    limit: int
    def __init__(self, proposal: _Optional[str] = ..., after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class VoteBallot(_message.Message):
    __slots__ = ("seq", "voter", "at_ms", "choice")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    voter: str
    at_ms: int
    choice: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seq: _Optional[int] = ..., voter: _Optional[str] = ..., at_ms: _Optional[int] = ..., choice: _Optional[_Iterable[int]] = ...) -> None: ...

class VoteBallotsResponse(_message.Message):
    __slots__ = ("ballots",)
    BALLOTS_FIELD_NUMBER: _ClassVar[int]
    ballots: _containers.RepeatedCompositeFieldContainer[VoteBallot]
    def __init__(self, ballots: _Optional[_Iterable[_Union[VoteBallot, _Mapping]]] = ...) -> None: ...

class VoteListRequest(_message.Message):
    __slots__ = ("team", "limit")
    TEAM_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    team: str
    limit: int
    def __init__(self, team: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class VoteListResponse(_message.Message):
    __slots__ = ("proposals",)
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[VoteProposal]
    def __init__(self, proposals: _Optional[_Iterable[_Union[VoteProposal, _Mapping]]] = ...) -> None: ...

class PathsReserveRequest(_message.Message):
    __slots__ = ("repo", "paths", "exclusive", "ttl_ms", "fence", "idempotency_key")
    REPO_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    repo: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    exclusive: bool
    ttl_ms: int
    fence: int
    idempotency_key: str
    def __init__(self, repo: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ..., exclusive: _Optional[bool] = ..., ttl_ms: _Optional[int] = ..., fence: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class PathsReleaseRequest(_message.Message):
    __slots__ = ("repo", "paths", "fence", "idempotency_key")
    REPO_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    repo: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    fence: int
    idempotency_key: str
    def __init__(self, repo: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ..., fence: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class PathGrant(_message.Message):
    __slots__ = ("path", "exclusive", "fence", "expires_at_ms", "renewed")
    PATH_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    path: str
    exclusive: bool
    fence: int
    expires_at_ms: int
    renewed: bool
    def __init__(self, path: _Optional[str] = ..., exclusive: _Optional[bool] = ..., fence: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., renewed: _Optional[bool] = ...) -> None: ...

class PathConflict(_message.Message):
    __slots__ = ("path", "holder", "held", "exclusive", "expires_at_ms")
    PATH_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    path: str
    holder: str
    held: str
    exclusive: bool
    expires_at_ms: int
    def __init__(self, path: _Optional[str] = ..., holder: _Optional[str] = ..., held: _Optional[str] = ..., exclusive: _Optional[bool] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class PathsResponse(_message.Message):
    __slots__ = ("outcome", "granted", "conflicts", "released", "not_held", "refusal", "message", "code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    NOT_HELD_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    granted: _containers.RepeatedCompositeFieldContainer[PathGrant]
    conflicts: _containers.RepeatedCompositeFieldContainer[PathConflict]
    released: _containers.RepeatedScalarFieldContainer[str]
    not_held: _containers.RepeatedScalarFieldContainer[str]
    refusal: str
    message: str
    code: OutcomeCode
    def __init__(self, outcome: _Optional[str] = ..., granted: _Optional[_Iterable[_Union[PathGrant, _Mapping]]] = ..., conflicts: _Optional[_Iterable[_Union[PathConflict, _Mapping]]] = ..., released: _Optional[_Iterable[str]] = ..., not_held: _Optional[_Iterable[str]] = ..., refusal: _Optional[str] = ..., message: _Optional[str] = ..., code: _Optional[_Union[OutcomeCode, str]] = ...) -> None: ...

class PathsListRequest(_message.Message):
    __slots__ = ("repo", "mine", "limit")
    REPO_FIELD_NUMBER: _ClassVar[int]
    MINE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    repo: str
    mine: bool
    limit: int
    def __init__(self, repo: _Optional[str] = ..., mine: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class PathReservation(_message.Message):
    __slots__ = ("repo", "path", "holder", "exclusive", "fence", "expires_at_ms")
    REPO_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    repo: str
    path: str
    holder: str
    exclusive: bool
    fence: int
    expires_at_ms: int
    def __init__(self, repo: _Optional[str] = ..., path: _Optional[str] = ..., holder: _Optional[str] = ..., exclusive: _Optional[bool] = ..., fence: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class PathsListResponse(_message.Message):
    __slots__ = ("reservations",)
    RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    reservations: _containers.RepeatedCompositeFieldContainer[PathReservation]
    def __init__(self, reservations: _Optional[_Iterable[_Union[PathReservation, _Mapping]]] = ...) -> None: ...

class RoutesRequest(_message.Message):
    __slots__ = ("reload",)
    RELOAD_FIELD_NUMBER: _ClassVar[int]
    reload: bool
    def __init__(self, reload: _Optional[bool] = ...) -> None: ...

class RangeRoute(_message.Message):
    __slots__ = ("start", "last", "epoch", "cell")
    START_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    start: int
    last: int
    epoch: int
    cell: int
    def __init__(self, start: _Optional[int] = ..., last: _Optional[int] = ..., epoch: _Optional[int] = ..., cell: _Optional[int] = ...) -> None: ...

class CellRoute(_message.Message):
    __slots__ = ("cell", "leader_addr")
    CELL_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    cell: int
    leader_addr: str
    def __init__(self, cell: _Optional[int] = ..., leader_addr: _Optional[str] = ...) -> None: ...

class RoutesResponse(_message.Message):
    __slots__ = ("ranges", "cells")
    RANGES_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[RangeRoute]
    cells: _containers.RepeatedCompositeFieldContainer[CellRoute]
    def __init__(self, ranges: _Optional[_Iterable[_Union[RangeRoute, _Mapping]]] = ..., cells: _Optional[_Iterable[_Union[CellRoute, _Mapping]]] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("id", "addr")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    id: int
    addr: str
    def __init__(self, id: _Optional[int] = ..., addr: _Optional[str] = ...) -> None: ...

class InitRequest(_message.Message):
    __slots__ = ("members", "cell")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    cell: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., cell: _Optional[int] = ...) -> None: ...

class AddLearnerRequest(_message.Message):
    __slots__ = ("member", "cell")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    member: Member
    cell: int
    def __init__(self, member: _Optional[_Union[Member, _Mapping]] = ..., cell: _Optional[int] = ...) -> None: ...

class ChangeMembershipRequest(_message.Message):
    __slots__ = ("voters", "retain", "cell")
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    RETAIN_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    voters: _containers.RepeatedScalarFieldContainer[int]
    retain: bool
    cell: int
    def __init__(self, voters: _Optional[_Iterable[int]] = ..., retain: _Optional[bool] = ..., cell: _Optional[int] = ...) -> None: ...

class AdminResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class InstallCredentialRequest(_message.Message):
    __slots__ = ("ca", "cert", "key")
    CA_FIELD_NUMBER: _ClassVar[int]
    CERT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ca: str
    cert: str
    key: str
    def __init__(self, ca: _Optional[str] = ..., cert: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class InstallCredentialResponse(_message.Message):
    __slots__ = ("certificate", "issuer", "trusted")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    TRUSTED_FIELD_NUMBER: _ClassVar[int]
    certificate: str
    issuer: str
    trusted: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, certificate: _Optional[str] = ..., issuer: _Optional[str] = ..., trusted: _Optional[_Iterable[str]] = ...) -> None: ...

class SnapshotSaveRequest(_message.Message):
    __slots__ = ("cell",)
    CELL_FIELD_NUMBER: _ClassVar[int]
    cell: int
    def __init__(self, cell: _Optional[int] = ...) -> None: ...

class SnapshotChunk(_message.Message):
    __slots__ = ("data", "revision", "total_bytes", "blake3")
    DATA_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    BLAKE3_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    revision: int
    total_bytes: int
    blake3: str
    def __init__(self, data: _Optional[bytes] = ..., revision: _Optional[int] = ..., total_bytes: _Optional[int] = ..., blake3: _Optional[str] = ...) -> None: ...

class Blob(_message.Message):
    __slots__ = ("data", "cell")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    cell: int
    def __init__(self, data: _Optional[bytes] = ..., cell: _Optional[int] = ...) -> None: ...

class BlobBatch(_message.Message):
    __slots__ = ("blobs",)
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    blobs: _containers.RepeatedCompositeFieldContainer[Blob]
    def __init__(self, blobs: _Optional[_Iterable[_Union[Blob, _Mapping]]] = ...) -> None: ...

class BlobAnswer(_message.Message):
    __slots__ = ("data", "code", "message")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    code: int
    message: str
    def __init__(self, data: _Optional[bytes] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class BlobAnswers(_message.Message):
    __slots__ = ("answers", "boot")
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[BlobAnswer]
    boot: int
    def __init__(self, answers: _Optional[_Iterable[_Union[BlobAnswer, _Mapping]]] = ..., boot: _Optional[int] = ...) -> None: ...

class CreateCellRequest(_message.Message):
    __slots__ = ("cell", "voters", "identity_secret")
    CELL_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_SECRET_FIELD_NUMBER: _ClassVar[int]
    cell: int
    voters: _containers.RepeatedCompositeFieldContainer[Member]
    identity_secret: bytes
    def __init__(self, cell: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., identity_secret: _Optional[bytes] = ...) -> None: ...

class FabricInitRequest(_message.Message):
    __slots__ = ("nodes", "cells", "replicas")
    NODES_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Member]
    cells: int
    replicas: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., cells: _Optional[int] = ..., replicas: _Optional[int] = ...) -> None: ...

class RangeInfo(_message.Message):
    __slots__ = ("start", "last", "epoch", "cell")
    START_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    start: int
    last: int
    epoch: int
    cell: int
    def __init__(self, start: _Optional[int] = ..., last: _Optional[int] = ..., epoch: _Optional[int] = ..., cell: _Optional[int] = ...) -> None: ...

class CellInfo(_message.Message):
    __slots__ = ("id", "leader", "voters", "ranges", "term", "last_applied", "public_key", "hibernating")
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    HIBERNATING_FIELD_NUMBER: _ClassVar[int]
    id: int
    leader: int
    voters: _containers.RepeatedScalarFieldContainer[int]
    ranges: _containers.RepeatedCompositeFieldContainer[RangeInfo]
    term: int
    last_applied: int
    public_key: str
    hibernating: bool
    def __init__(self, id: _Optional[int] = ..., leader: _Optional[int] = ..., voters: _Optional[_Iterable[int]] = ..., ranges: _Optional[_Iterable[_Union[RangeInfo, _Mapping]]] = ..., term: _Optional[int] = ..., last_applied: _Optional[int] = ..., public_key: _Optional[str] = ..., hibernating: _Optional[bool] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("id", "addr", "reachable")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    id: int
    addr: str
    reachable: bool
    def __init__(self, id: _Optional[int] = ..., addr: _Optional[str] = ..., reachable: _Optional[bool] = ...) -> None: ...

class FabricStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FabricStatusResponse(_message.Message):
    __slots__ = ("nodes", "cells", "alarms", "map_version")
    NODES_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    ALARMS_FIELD_NUMBER: _ClassVar[int]
    MAP_VERSION_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    cells: _containers.RepeatedCompositeFieldContainer[CellInfo]
    alarms: _containers.RepeatedScalarFieldContainer[str]
    map_version: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., cells: _Optional[_Iterable[_Union[CellInfo, _Mapping]]] = ..., alarms: _Optional[_Iterable[str]] = ..., map_version: _Optional[int] = ...) -> None: ...

class RangeMoveRequest(_message.Message):
    __slots__ = ("start", "to_cell")
    START_FIELD_NUMBER: _ClassVar[int]
    TO_CELL_FIELD_NUMBER: _ClassVar[int]
    start: int
    to_cell: int
    def __init__(self, start: _Optional[int] = ..., to_cell: _Optional[int] = ...) -> None: ...

class RangeSplitRequest(_message.Message):
    __slots__ = ("start", "at")
    START_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    start: int
    at: int
    def __init__(self, start: _Optional[int] = ..., at: _Optional[int] = ...) -> None: ...

class RangeMoveResponse(_message.Message):
    __slots__ = ("ranges", "rows")
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[RangeInfo]
    rows: int
    def __init__(self, ranges: _Optional[_Iterable[_Union[RangeInfo, _Mapping]]] = ..., rows: _Optional[int] = ...) -> None: ...

class RangeProgressRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RangeChange(_message.Message):
    __slots__ = ("kind", "start", "to_cell", "at", "phase", "rows", "pages")
    KIND_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    TO_CELL_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    start: int
    to_cell: int
    at: int
    phase: str
    rows: int
    pages: int
    def __init__(self, kind: _Optional[str] = ..., start: _Optional[int] = ..., to_cell: _Optional[int] = ..., at: _Optional[int] = ..., phase: _Optional[str] = ..., rows: _Optional[int] = ..., pages: _Optional[int] = ...) -> None: ...

class RangeProgressResponse(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[RangeChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[RangeChange, _Mapping]]] = ...) -> None: ...

class DeliverRequest(_message.Message):
    __slots__ = ("envelope", "envelopes")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    envelopes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, envelope: _Optional[bytes] = ..., envelopes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class DeliverResponse(_message.Message):
    __slots__ = ("verdict", "expected_seq", "message", "applied_through")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    expected_seq: int
    message: str
    applied_through: int
    def __init__(self, verdict: _Optional[str] = ..., expected_seq: _Optional[int] = ..., message: _Optional[str] = ..., applied_through: _Optional[int] = ...) -> None: ...

class RestoreCellChunk(_message.Message):
    __slots__ = ("cell", "voters", "data", "nodes")
    CELL_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    cell: int
    voters: _containers.RepeatedCompositeFieldContainer[Member]
    data: bytes
    nodes: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, cell: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., data: _Optional[bytes] = ..., nodes: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class FabricRestoreRequest(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class ChannelResetRequest(_message.Message):
    __slots__ = ("from_cell", "to_cell")
    FROM_CELL_FIELD_NUMBER: _ClassVar[int]
    TO_CELL_FIELD_NUMBER: _ClassVar[int]
    from_cell: int
    to_cell: int
    def __init__(self, from_cell: _Optional[int] = ..., to_cell: _Optional[int] = ...) -> None: ...

class ChannelResetResponse(_message.Message):
    __slots__ = ("before_seq", "seq", "message")
    BEFORE_SEQ_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    before_seq: int
    seq: int
    message: str
    def __init__(self, before_seq: _Optional[int] = ..., seq: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
