//! Versioned encoding of stored values: one version byte, then postcard.
//!
//! Every value the board writes goes through [`encode`], so a later shape can add a new
//! version byte and keep reading the old one.

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

/// Decode a stored value. Unknown versions or undecodable bytes mean corrupt state or a
/// bug, so they panic instead of guessing.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> T {
    assert!(!bytes.is_empty(), "stored value is empty");
    assert_eq!(
        bytes[0], VERSION,
        "stored value has unknown version {}",
        bytes[0]
    );
    match postcard::from_bytes(&bytes[1..]) {
        Ok(value) => value,
        Err(error) => panic!("stored value does not decode: {error}"),
    }
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
    match bytes.split_first() {
        Some((&VERSION, body)) => postcard::from_bytes(body).ok(),
        _ => None,
    }
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
}
