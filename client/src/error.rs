//! Every failure the client reports, and the one place Kafka's error codes are classified:
//! which are worth retrying ([`retriable`]) and which mean the client's view of the
//! cluster is stale ([`refreshes_metadata`], [`refreshes_coordinator`]). Producer,
//! consumer and admin all decide from these, so a code is never judged twice.

use std::sync::Arc;
use strata_protocol::{ApiKey, ErrorCode};

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed client operation. Cheap to clone, so one broker failure can be handed to
/// every request that was waiting on the same connection.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The broker answered with a Kafka error code.
    #[error("{}{}", code.name(), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        /// The code.
        code: ErrorCode,
        /// The broker's error message, when the API carries one.
        message: Option<String>,
    },
    /// Connecting to a broker or talking to it failed; the connection is closed.
    #[error("connection to {addr} failed: {reason}")]
    Connection {
        /// host:port.
        addr: String,
        /// What happened (refused, reset, closed by the broker, ...).
        reason: Arc<str>,
    },
    /// The broker sent bytes that are not a valid response to the request (a truncated
    /// or oversized frame, a wrong correlation id, a malformed body). The connection is
    /// closed and a new one is made for the next request.
    #[error("malformed response from {addr}: {reason}")]
    Protocol {
        /// host:port.
        addr: String,
        /// What was wrong.
        reason: Arc<str>,
    },
    /// No answer in time (`request.timeout.ms`, a delivery or API timeout).
    #[error("timed out: {0}")]
    Timeout(Arc<str>),
    /// The broker does not support any version of the API this client can speak.
    #[error("the broker supports no version of {} this client speaks", api.name())]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
    },
    /// A setting is missing or invalid.
    #[error("invalid configuration: {0}")]
    Config(Arc<str>),
    /// The operation is not valid now (for example `commit` without `begin`).
    #[error("invalid state: {0}")]
    State(Arc<str>),
    /// The client (or the producer or consumer) was closed.
    #[error("the client is closed")]
    Closed,
    /// A transactional producer's failure, sorted as the Java client sorts them: `fatal`
    /// (the producer can only be closed: fenced by a newer instance, not authorized, ...)
    /// or abortable (the open transaction must be aborted, then the producer goes on).
    #[error("{}: {cause}", if *fatal { "fatal producer error" } else { "the transaction must be aborted" })]
    Transaction {
        /// True if the producer must be closed, false if aborting the transaction is enough.
        fatal: bool,
        /// What failed.
        cause: Arc<Error>,
    },
}

impl Error {
    /// A Kafka error without a message.
    pub fn kafka(code: ErrorCode) -> Error {
        Error::Kafka { code, message: None }
    }

    /// An error from a response's `error_code` and optional message; `None` for NONE (0).
    pub fn from_code(code: i16, message: Option<&str>) -> Option<Error> {
        if code == 0 {
            return None;
        }
        let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
        Some(Error::Kafka { code, message: message.filter(|m| !m.is_empty()).map(str::to_string) })
    }

    /// A connection failure.
    pub fn connection(addr: &str, reason: impl std::fmt::Display) -> Error {
        Error::Connection { addr: addr.to_string(), reason: reason.to_string().into() }
    }

    /// A malformed response.
    pub fn protocol(addr: &str, reason: impl std::fmt::Display) -> Error {
        Error::Protocol { addr: addr.to_string(), reason: reason.to_string().into() }
    }

    /// A timeout.
    pub fn timeout(what: impl std::fmt::Display) -> Error {
        Error::Timeout(what.to_string().into())
    }

    /// An invalid setting.
    pub fn config(what: impl std::fmt::Display) -> Error {
        Error::Config(what.to_string().into())
    }

    /// An operation invalid in the current state.
    pub fn state(what: impl std::fmt::Display) -> Error {
        Error::State(what.to_string().into())
    }

    /// The Kafka error code, if the broker sent one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Kafka { code, .. } => Some(*code),
            Error::Transaction { cause, .. } => cause.code(),
            _ => None,
        }
    }

    /// True if a producer that saw this can do nothing more but close (Java's fatal
    /// producer errors: fenced by a newer instance with the same `transactional.id`, not
    /// authorized for it, ...).
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Transaction { fatal, .. } => *fatal,
            Error::Kafka { code, .. } => fatal_to_producer(*code),
            _ => false,
        }
    }

    /// True if the open transaction failed and must be aborted before the producer goes on.
    pub fn requires_abort(&self) -> bool {
        matches!(self, Error::Transaction { fatal: false, .. })
    }

    /// True if the same operation may succeed when tried again: a retriable Kafka code,
    /// a lost connection, a malformed response (a new connection is made) or a timeout.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => retriable(*code),
            Error::Connection { .. } | Error::Protocol { .. } | Error::Timeout(_) => true,
            _ => false,
        }
    }

    /// True if the client should refresh its metadata before trying again.
    pub fn refreshes_metadata(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => refreshes_metadata(*code),
            Error::Connection { .. } | Error::Protocol { .. } => true,
            _ => false,
        }
    }
}

/// Kafka's retriable errors (the Java client's `RetriableException` family): the
/// request may succeed if sent again, possibly after a metadata refresh.
pub fn retriable(code: ErrorCode) -> bool {
    use ErrorCode::*;
    matches!(
        code,
        CorruptMessage
            | UnknownTopicOrPartition
            | LeaderNotAvailable
            | NotLeaderOrFollower
            | RequestTimedOut
            | NetworkException
            | CoordinatorLoadInProgress
            | CoordinatorNotAvailable
            | NotCoordinator
            | NotEnoughReplicas
            | NotEnoughReplicasAfterAppend
            | NotController
            | ConcurrentTransactions
            | KafkaStorageError
            | FetchSessionIdNotFound
            | InvalidFetchSessionEpoch
            | ListenerNotFound
            | FencedLeaderEpoch
            | UnknownLeaderEpoch
            | OffsetNotAvailable
            | PreferredLeaderNotAvailable
            | EligibleLeadersNotAvailable
            | UnstableOffsetCommit
            | ThrottlingQuotaExceeded
            | UnknownTopicId
            | InconsistentTopicId
            | FetchSessionTopicIdError
    )
}

/// Errors that mean the partition's leader (or the topic) is not where the client's
/// metadata says: refresh it before the retry.
pub fn refreshes_metadata(code: ErrorCode) -> bool {
    use ErrorCode::*;
    matches!(
        code,
        UnknownTopicOrPartition
            | LeaderNotAvailable
            | NotLeaderOrFollower
            | FencedLeaderEpoch
            | UnknownLeaderEpoch
            | KafkaStorageError
            | UnknownTopicId
            | InconsistentTopicId
            | NotController
            | ListenerNotFound
    )
}

/// Errors after which a producer must be closed (the Java producer's fatal errors):
/// another instance with the same `transactional.id` fenced it, it is not authorized,
/// or the coordinator says its state cannot go on.
pub fn fatal_to_producer(code: ErrorCode) -> bool {
    use ErrorCode::*;
    matches!(
        code,
        ProducerFenced
            | InvalidProducerEpoch
            | TransactionCoordinatorFenced
            | TransactionalIdAuthorizationFailed
            | ClusterAuthorizationFailed
            | InvalidTxnState
            | InvalidProducerIdMapping
            | InvalidTransactionTimeout
            | UnsupportedVersion
            | UnsupportedForMessageFormat
    )
}

/// Errors that mean the group or transaction coordinator moved: find it again.
pub fn refreshes_coordinator(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_classified_as_kafka_does() {
        assert!(retriable(ErrorCode::NotLeaderOrFollower));
        assert!(retriable(ErrorCode::CoordinatorLoadInProgress));
        assert!(!retriable(ErrorCode::ProducerFenced));
        assert!(!retriable(ErrorCode::TopicAuthorizationFailed));
        assert!(!retriable(ErrorCode::OutOfOrderSequenceNumber));
        assert!(refreshes_metadata(ErrorCode::FencedLeaderEpoch));
        assert!(!refreshes_metadata(ErrorCode::RequestTimedOut));
        assert!(refreshes_coordinator(ErrorCode::NotCoordinator));
        assert!(fatal_to_producer(ErrorCode::ProducerFenced));
        assert!(!fatal_to_producer(ErrorCode::ConcurrentTransactions));
    }

    #[test]
    fn errors_carry_their_code_and_message() {
        assert!(Error::from_code(0, Some("x")).is_none());
        let e = Error::from_code(6, Some("moved")).expect("error");
        assert_eq!(e.code(), Some(ErrorCode::NotLeaderOrFollower));
        assert!(e.is_retriable() && e.refreshes_metadata());
        assert_eq!(e.to_string(), "NOT_LEADER_OR_FOLLOWER: moved");
        let unknown = Error::from_code(9999, None).expect("error");
        assert_eq!(unknown.code(), Some(ErrorCode::UnknownServerError));
        assert!(Error::connection("h:1", "refused").is_retriable());
        assert!(!Error::config("bad").is_retriable());
    }
}
