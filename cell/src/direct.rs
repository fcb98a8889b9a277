//! A keyed request sent straight to the node hosting its cell's leader names that cell and
//! the range epoch its sender saw, in one metadata header ([`ROUTE_HEADER`]). The node then
//! serves it from that cell only, without forwarding: `NotLeader` (with the leader's
//! address) or `WrongRange` tell the sender to look again, and the board refuses an epoch
//! the cell does not serve, so a stale sender can never be served twice. Which cell and
//! epoch a key has is the fabric's business (`whip-fabric`); this crate only carries the
//! two numbers.

use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};

/// The metadata header naming a direct request's cell and epoch: `<cell>.<epoch>`.
pub const ROUTE_HEADER: &str = "whip-route";

/// The cell a direct request is for and the epoch of its range, as its sender saw them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direct {
    /// The cell owning the request's key.
    pub cell: u64,
    /// The epoch of the key's range (the board refuses any other).
    pub epoch: u64,
}

impl Direct {
    /// The route a call's metadata names, if any; a malformed header is refused.
    pub fn of(metadata: &MetadataMap) -> Result<Option<Direct>, Status> {
        let Some(value) = metadata.get(ROUTE_HEADER) else {
            return Ok(None);
        };
        let malformed =
            || Status::invalid_argument(format!("{ROUTE_HEADER} must be <cell>.<epoch>"));
        let text = value.to_str().map_err(|_| malformed())?;
        let (cell, epoch) = text.split_once('.').ok_or_else(malformed)?;
        let cell = cell.parse().map_err(|_| malformed())?;
        let epoch = epoch.parse().map_err(|_| malformed())?;
        if epoch == 0 {
            // Epochs start at 1: zero is what a standalone cell's requests carry.
            return Err(malformed());
        }
        Ok(Some(Direct { cell, epoch }))
    }

    /// Name this route in `metadata`.
    pub fn stamp(&self, metadata: &mut MetadataMap) {
        let value = format!("{}.{}", self.cell, self.epoch);
        let value = MetadataValue::try_from(value).expect("digits and a dot are ascii");
        metadata.insert(ROUTE_HEADER, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_survives_the_header_and_a_bad_one_is_refused() {
        let mut metadata = MetadataMap::new();
        assert_eq!(Direct::of(&metadata).unwrap(), None);
        let route = Direct { cell: 3, epoch: 17 };
        route.stamp(&mut metadata);
        assert_eq!(Direct::of(&metadata).unwrap(), Some(route));
        for bad in ["3", "3.", ".4", "3.0", "x.1", "1.2.3", "-1.2"] {
            let mut metadata = MetadataMap::new();
            metadata.insert(ROUTE_HEADER, MetadataValue::try_from(bad).unwrap());
            let refused = Direct::of(&metadata).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }
}
