//! Hooks the process tests set through the environment, compiled only with the
//! `test-hooks` feature (the test build turns it on; a plain build of the binary has
//! none). A hook only widens a window a test must hit: it never changes what happens.

use crate::range_change::RangePhase;

/// With `WHIP_TEST_MOVE_HOLD=PHASE:MS`, a move's driver waits `MS` ms at the end of the
/// phase whose code is `PHASE`: `precopying` once the copy before the freeze is done (the
/// source still serves and records changes), `copying` right after the freeze, before
/// anything is sent. A test stops the driver in that window.
pub(crate) async fn hold(phase: RangePhase) {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = held_ms(phase) {
        tracing::warn!(phase = phase.code(), ms, "test hook: holding the move");
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = phase;
}

#[cfg(feature = "test-hooks")]
fn held_ms(phase: RangePhase) -> Option<u64> {
    let setting = std::env::var("WHIP_TEST_MOVE_HOLD").ok()?;
    let (code, ms) = setting.split_once(':')?;
    (code == phase.code()).then_some(())?;
    ms.parse().ok()
}
