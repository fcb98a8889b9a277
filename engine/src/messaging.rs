//! The messaging providers a `channel` names (LANGUAGE-AGENTS.md §4.5): one closed set, each
//! with its stable name, what its receipts say, and whether it can send or receive.
//!
//! `fabric` is ours: typed agent mail through the fabric's mailboxes (`runtime::mail`).
//! `local` appends each send to the embedded store's `mailbox.jsonl`; `stdio` prints it;
//! `fixture` only answers a receipt; `desktop` is outbound only and cannot send from a
//! worker. The runtime sends (`runtime::mail`); the checker refuses an unknown name.

/// A channel's messaging provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessagingProvider {
    /// Typed agent mail through the fabric (ours).
    Fabric,
    /// A line in the embedded store's `mailbox.jsonl`.
    Local,
    /// A line on the worker's stdout.
    Stdio,
    /// A receipt and nothing else.
    Fixture,
    /// Desktop notifications: outbound only, not available to a worker.
    Desktop,
}

impl MessagingProvider {
    /// Every provider.
    pub const ALL: [MessagingProvider; 5] = [
        MessagingProvider::Fabric,
        MessagingProvider::Local,
        MessagingProvider::Stdio,
        MessagingProvider::Fixture,
        MessagingProvider::Desktop,
    ];

    /// The name a program writes (and a send's arguments store).
    pub fn code(self) -> &'static str {
        match self {
            MessagingProvider::Fabric => "fabric",
            MessagingProvider::Local => "local",
            MessagingProvider::Stdio => "stdio",
            MessagingProvider::Fixture => "fixture",
            MessagingProvider::Desktop => "desktop",
        }
    }

    /// The provider named `code`, if it is one.
    pub fn from_code(code: &str) -> Option<MessagingProvider> {
        Self::ALL.into_iter().find(|p| p.code() == code)
    }

    /// The `provider` a send's receipt names.
    pub fn receipt(self) -> &'static str {
        match self {
            MessagingProvider::Fabric => "fabric",
            MessagingProvider::Local => "std.messaging.local",
            MessagingProvider::Stdio => "std.messaging.stdio",
            MessagingProvider::Fixture => "fixture",
            MessagingProvider::Desktop => "std.messaging.desktop",
        }
    }

    /// Whether `when message from` can observe a channel of this provider.
    pub fn receives(self) -> bool {
        !matches!(self, MessagingProvider::Desktop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_reads_back_from_its_name() {
        for p in MessagingProvider::ALL {
            assert_eq!(MessagingProvider::from_code(p.code()), Some(p));
        }
        let names: Vec<&str> = MessagingProvider::ALL.iter().map(|p| p.code()).collect();
        assert_eq!(names, ["fabric", "local", "stdio", "fixture", "desktop"]);
        assert_eq!(MessagingProvider::from_code("carrier"), None);
    }
}
