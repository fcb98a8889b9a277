//! One connection budget for every listener of a process.
//!
//! Each accepted connection holds a descriptor until it closes. A process serves several
//! listeners (the gRPC port, the `--http` observation listener, `whip executor`'s port) and
//! also needs descriptors for its own storage files and outgoing peer channels. So every
//! listener takes its connections from one [`Budget`] per process, sized from the soft
//! `RLIMIT_NOFILE` ([`Budget::process`]), and one remote address may hold only a share of it
//! ([`limits::CONNECTIONS_PER_ADDRESS_DIVISOR`], at least
//! [`limits::CONNECTIONS_PER_ADDRESS_MIN`]), so a single address cannot take every slot.
//!
//! A connection past either bound is closed at once; refusals are logged at most at every
//! power-of-two count, so a flood does not flood the log too.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::limits;

/// Connections a process may hold open, and how many each remote address holds now.
#[derive(Debug)]
pub struct Budget {
    total_max: usize,
    per_address_max: usize,
    held: Mutex<Held>,
    refused: AtomicU64,
    accept_failures: AtomicU64,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot of the process is taken.
    Full,
    /// The address already holds its share.
    AddressShare,
}

/// One connection's slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    budget: Arc<Budget>,
    address: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().expect("budget lock");
        held.total -= 1;
        let count = held
            .by_address
            .get_mut(&self.address)
            .expect("a slot's address is counted while the slot lives");
        *count -= 1;
        if *count == 0 {
            held.by_address.remove(&self.address);
        }
    }
}

/// The soft limit on open descriptors of this process, if it can be read.
pub fn descriptors_soft_max() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    // RLIM_INFINITY does not fit a usize on every target: it means "no bound" here.
    read.then(|| usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

/// Connections a process with `descriptors` open files may hold: half of what is left after
/// [`limits::DESCRIPTORS_RESERVED`] (the other half is for storage files and outgoing peer
/// channels, which grow with the cells a node hosts), at most [`limits::CONNECTIONS_MAX`].
pub fn connections_max(descriptors: Option<usize>) -> usize {
    let Some(soft) = descriptors else {
        return limits::CONNECTIONS_MAX;
    };
    let spare = soft.saturating_sub(limits::DESCRIPTORS_RESERVED) / 2;
    limits::CONNECTIONS_MAX.min(spare.max(1))
}

impl Budget {
    /// A budget of `total_max` connections, one address holding at most its share.
    pub fn new(total_max: usize) -> Budget {
        let share = total_max / limits::CONNECTIONS_PER_ADDRESS_DIVISOR;
        Budget {
            total_max,
            per_address_max: share
                .max(limits::CONNECTIONS_PER_ADDRESS_MIN)
                .min(total_max),
            held: Mutex::default(),
            refused: AtomicU64::new(0),
            accept_failures: AtomicU64::new(0),
        }
    }

    /// The budget every listener of this process shares, sized at its first use.
    pub fn process() -> Arc<Budget> {
        static PROCESS: OnceLock<Arc<Budget>> = OnceLock::new();
        PROCESS
            .get_or_init(|| {
                let total = connections_max(descriptors_soft_max());
                let budget = Budget::new(total);
                tracing::debug!(
                    total,
                    per_address = budget.per_address_max,
                    "connection budget"
                );
                Arc::new(budget)
            })
            .clone()
    }

    /// Connections the process may hold.
    pub fn total_max(&self) -> usize {
        self.total_max
    }

    /// Connections one address may hold.
    pub fn per_address_max(&self) -> usize {
        self.per_address_max
    }

    /// Connections refused since the process started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections held now (all addresses).
    pub fn held(&self) -> usize {
        self.held.lock().expect("budget lock").total
    }

    /// A slot for a connection from `address` (an IPv4-mapped IPv6 address counts as its
    /// IPv4 form), or why not.
    pub fn take(self: &Arc<Self>, address: IpAddr) -> Result<Slot, Refusal> {
        let address = address.to_canonical();
        let mut held = self.held.lock().expect("budget lock");
        if held.total >= self.total_max {
            return Err(Refusal::Full);
        }
        let mine = held.by_address.entry(address).or_insert(0);
        if *mine >= self.per_address_max {
            return Err(Refusal::AddressShare);
        }
        *mine += 1;
        held.total += 1;
        Ok(Slot {
            budget: self.clone(),
            address,
        })
    }

    /// Log a refused connection of `listener` from `peer` now and then.
    fn note_refused(&self, listener: &'static str, peer: SocketAddr, why: Refusal) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_power_of_two() {
            return;
        }
        let reason = match why {
            Refusal::Full => "the process's connection budget is used up",
            Refusal::AddressShare => "the address holds its share of the connection budget",
        };
        tracing::warn!(
            listener,
            %peer,
            refused = n,
            total_max = self.total_max,
            per_address_max = self.per_address_max,
            "connection refused: {reason}"
        );
    }

    /// Log a failed accept now and then, and pause before the next (out of descriptors, an
    /// accept in a loop would spin).
    async fn note_accept_failed(&self, listener: &'static str, error: std::io::Error) {
        let n = self.accept_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(listener, %error, failures = n, "accept failed");
        }
        tokio::time::sleep(Duration::from_millis(limits::ACCEPT_BACKOFF_MS)).await;
    }

    /// The next connection of `listener` that gets a slot (TCP_NODELAY set). Connections
    /// refused by the budget are closed at once; `name` names the listener in the log.
    pub async fn accept(
        self: &Arc<Self>,
        listener: &TcpListener,
        name: &'static str,
    ) -> (TcpStream, SocketAddr, Slot) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(pair) => pair,
                Err(e) => {
                    self.note_accept_failed(name, e).await;
                    continue;
                }
            };
            match self.take(peer.ip()) {
                Ok(slot) => {
                    let _ = stream.set_nodelay(true);
                    return (stream, peer, slot);
                }
                Err(why) => {
                    // Dropping the stream closes it and frees its descriptor now.
                    drop(stream);
                    self.note_refused(name, peer, why);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn one_address_holds_at_most_its_share() {
        let budget = Arc::new(Budget::new(100));
        assert_eq!(budget.per_address_max(), 25);
        let mine: Vec<Slot> = (0..25)
            .map(|_| budget.take(ip("10.0.0.1")).unwrap())
            .collect();
        assert_eq!(
            budget.take(ip("10.0.0.1")).unwrap_err(),
            Refusal::AddressShare
        );
        let mapped = ip("::ffff:10.0.0.1");
        assert_eq!(budget.take(mapped).unwrap_err(), Refusal::AddressShare);
        let other = budget
            .take(ip("10.0.0.2"))
            .expect("another address gets in");
        drop(mine);
        assert_eq!(budget.held(), 1);
        drop(other);
        assert_eq!(budget.held(), 0);
        assert!(budget.held.lock().unwrap().by_address.is_empty());
    }

    #[test]
    fn the_process_total_bounds_every_address() {
        let budget = Arc::new(Budget::new(40));
        assert_eq!(
            budget.per_address_max(),
            limits::CONNECTIONS_PER_ADDRESS_MIN
        );
        let mut held = Vec::new();
        for n in 0..40u8 {
            let address = IpAddr::from([10, 0, 1, n / 16]);
            held.push(budget.take(address).unwrap());
        }
        assert_eq!(budget.take(ip("10.9.9.9")).unwrap_err(), Refusal::Full);
    }

    #[test]
    fn the_budget_follows_the_descriptor_limit() {
        assert_eq!(connections_max(Some(256)), 96);
        assert_eq!(connections_max(Some(10)), 1);
        assert_eq!(connections_max(None), limits::CONNECTIONS_MAX);
        assert_eq!(connections_max(Some(1 << 20)), limits::CONNECTIONS_MAX);
    }
}
