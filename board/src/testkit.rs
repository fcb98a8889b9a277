//! Test-only: a board applied command by command on an in-memory transaction, each command
//! at the next log index and at the time the test gives, as a cell's state machine would
//! apply it. Module tests add their own reads through a local trait.

use crate::access::Caller;
use crate::txn::MemTxn;
use crate::types::{Command, Outcome, Request, Stamp};

/// An in-memory board and the last log index it applied.
pub(crate) struct Store {
    pub(crate) txn: MemTxn,
    index: u64,
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            txn: MemTxn::default(),
            index: 0,
        }
    }

    /// Apply `command` as `caller` at `time_ms`, at the next log index.
    pub(crate) fn by(&mut self, caller: Caller, time_ms: u64, command: Command) -> Outcome {
        self.index += 1;
        let stamp = Stamp {
            index: self.index,
            position: 0,
            time_ms,
        };
        crate::apply(&mut self.txn, stamp, &Request::by(caller, None, command)).outcome
    }

    /// Apply `command` as the operator.
    pub(crate) fn run(&mut self, time_ms: u64, command: Command) -> Outcome {
        self.by(Caller::Operator, time_ms, command)
    }

    /// The server's tick at `time_ms`.
    pub(crate) fn tick(&mut self, time_ms: u64) -> Outcome {
        self.by(Caller::Server, time_ms, Command::Tick)
    }
}

/// The stamp of log index `index` at `time_ms`, first in its batch.
pub(crate) fn stamp_at(index: u64, time_ms: u64) -> Stamp {
    Stamp {
        index,
        position: 0,
        time_ms,
    }
}
