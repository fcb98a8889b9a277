//! The ordered byte store that `apply` reads and writes.

use std::collections::BTreeMap;
use std::ops::Bound;

/// An ordered key/value view inside one storage transaction.
///
/// Production backends (redb, sled) implement it over a write set that commits atomically
/// with the applied log id; tests use [`MemTxn`]. Reads see the transaction's own writes.
pub trait Txn {
    /// The value under `key`, if any.
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// Insert or replace `key`.
    fn put(&mut self, key: &[u8], value: &[u8]);
    /// Remove `key` (no-op when absent).
    fn delete(&mut self, key: &[u8]);
    /// Up to `limit` pairs with `start <= key < end`, in key order.
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)>;
}

/// An in-memory [`Txn`] over a `BTreeMap`: the reference store for tests and models.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemTxn {
    /// Every key and value, in order.
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Txn for MemTxn {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.map.insert(key.to_vec(), value.to_vec());
    }

    fn delete(&mut self, key: &[u8]) {
        self.map.remove(key);
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        if start >= end {
            return Vec::new();
        }
        self.map
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
