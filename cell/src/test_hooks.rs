//! Hooks the process tests set through the environment, compiled only with the
//! `test-hooks` feature (the test build turns it on; a plain build of the binary has
//! none). A hook only ends the process at a point a test must hit: it never changes what
//! happens before it.

/// With `WHIP_TEST_CRASH_AT=POINT`, the process exits (status 3) on reaching `point`:
///
/// - `follow_up`: a request whose apply decided follow-ups was answered by its cell, and
///   this server has carried none of them out (the outbox's executor must);
/// - `fabric_claim`: a claim's fabric tier claimed a task, and the caller has no answer
///   yet (its retry under the same key must find the same claim).
pub fn crash_at(point: &str) {
    #[cfg(feature = "test-hooks")]
    if std::env::var("WHIP_TEST_CRASH_AT").is_ok_and(|at| at == point) {
        tracing::warn!(point, "test hook: the process exits here");
        std::process::exit(3);
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = point;
}
