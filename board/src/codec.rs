//! Versioned encoding of stored values: one version byte, then postcard.
//!
//! Every value the board writes goes through [`encode`], so a later shape can add a new
//! version byte and keep reading the old one. Enums inside a value write pinned variant
//! codes (`crate::codes`), so the bytes of a version never depend on declaration order;
//! `crate::golden` holds them.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The current encoding version of every stored value.
pub(crate) const VERSION: u8 = 1;

/// Encode `value` as the version byte followed by its postcard bytes.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![VERSION];
    // Encoding plain owned structs into a Vec cannot fail; a failure is a bug.
    let body = postcard::to_stdvec(value).expect("postcard encodes board records");
    out.extend_from_slice(&body);
    out
}

/// Why stored bytes do not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// No bytes at all.
    #[error("stored value is empty")]
    Empty,
    /// A version byte this build does not know (a newer build wrote it, or corruption).
    #[error("unsupported_encoding: stored value has unknown version {version}")]
    UnsupportedEncoding {
        /// The version byte found.
        version: u8,
    },
    /// The body does not decode as the expected type (among others: a variant code the
    /// enum does not list, see `crate::codes`).
    #[error("stored value does not decode: {reason}")]
    Malformed {
        /// postcard's error.
        reason: String,
    },
}

/// Decode a value written by [`encode`], refusing what this build cannot read.
pub(crate) fn decode_checked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&VERSION, body)) => {
            postcard::from_bytes(body).map_err(|error| DecodeError::Malformed {
                reason: error.to_string(),
            })
        }
        Some((&version, _)) => Err(DecodeError::UnsupportedEncoding { version }),
    }
}

/// Decode a stored value. Unknown versions or undecodable bytes mean corrupt state or a
/// bug, so they panic instead of guessing (a row that cannot be read is never skipped).
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> T {
    decode_checked(bytes).unwrap_or_else(|error| panic!("{error}"))
}

/// Encode `value` under an explicit version byte: for a value whose shape grew, so that
/// [`decode_versioned`] can tell the shapes apart.
pub(crate) fn encode_versioned<T: Serialize>(version: u8, value: &T) -> Vec<u8> {
    let mut out = encode(value);
    out[0] = version;
    out
}

/// The version byte and postcard body of a stored value encoded with [`encode_versioned`];
/// `None` when empty.
pub(crate) fn versioned(bytes: &[u8]) -> Option<(u8, &[u8])> {
    bytes.split_first().map(|(version, body)| (*version, body))
}

/// Decode bytes that came from outside this cell's own writes (another cell's export): `None`
/// where [`decode`] would panic.
pub(crate) fn try_decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    decode_checked(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_starts_with_version() {
        let bytes = encode(&(7u64, String::from("x")));
        assert_eq!(bytes[0], VERSION);
        let back: (u64, String) = decode(&bytes);
        assert_eq!(back, (7, String::from("x")));
    }

    #[test]
    #[should_panic(expected = "unknown version")]
    fn unknown_version_panics() {
        let _: u64 = decode(&[9, 1]);
    }

    #[test]
    fn unknown_version_is_a_typed_refusal() {
        let refused = decode_checked::<u64>(&[9, 1]);
        assert_eq!(
            refused,
            Err(DecodeError::UnsupportedEncoding { version: 9 })
        );
        assert_eq!(decode_checked::<u64>(&[]), Err(DecodeError::Empty));
        assert!(matches!(
            decode_checked::<u64>(&[VERSION]),
            Err(DecodeError::Malformed { .. })
        ));
    }
}
