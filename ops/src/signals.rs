//! Stop requests: SIGINT (Ctrl-C) and SIGTERM (service managers), watched from the start of
//! the process so a signal that arrives early is not lost.

use std::sync::OnceLock;

use tokio::sync::watch;

static STOP: OnceLock<watch::Receiver<bool>> = OnceLock::new();

/// Start watching for stop signals (call once, inside the runtime, before any work).
pub(crate) fn watch() {
    let (tx, rx) = watch::channel(false);
    if STOP.set(rx).is_err() {
        return;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::spawn(async move {
        let terminated = async {
            match term.as_mut() {
                Some(term) => {
                    term.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
            _ = terminated => tracing::info!("terminated"),
        }
        // The stop that follows is asked for: quiet from the first moment (`logging`).
        crate::logging::stopping();
        let _ = tx.send(true);
    });
}

/// `work`, ended by a stop signal: it gets [`crate::limits::STOP_GRACE_MS`] to end itself
/// (a command that watches [`stopped`] gives back what it waited for and returns), then is
/// dropped with exit status 130.
pub(crate) async fn interruptible(
    work: impl std::future::Future<Output = anyhow::Result<std::process::ExitCode>>,
) -> anyhow::Result<std::process::ExitCode> {
    tokio::pin!(work);
    tokio::select! {
        result = &mut work => result,
        () = stopped() => {
            let grace = std::time::Duration::from_millis(crate::limits::STOP_GRACE_MS);
            match tokio::time::timeout(grace, &mut work).await {
                Ok(result) => result,
                Err(_) => {
                    tracing::info!("stopped before the command ended");
                    Ok(std::process::ExitCode::from(STOPPED_EXIT))
                }
            }
        }
    }
}

/// The exit status of a command a stop signal ended (128 + SIGINT, as shells report it).
pub(crate) const STOPPED_EXIT: u8 = 130;

/// Whether a stop signal arrived.
pub(crate) fn is_stopped() -> bool {
    STOP.get().is_some_and(|rx| *rx.borrow())
}

/// Resolves once a stop signal arrived.
pub(crate) async fn stopped() {
    let Some(rx) = STOP.get() else {
        return std::future::pending().await;
    };
    let mut rx = rx.clone();
    let _ = rx.wait_for(|stop| *stop).await;
}
