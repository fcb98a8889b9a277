//! Accepted connections, bounded: past [`limits::CONNECTIONS_MAX`] open connections a new
//! one is closed at once (and logged at most once per interval), so idle or abandoned
//! connections cannot starve the accept loop or the descriptor table.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::limits;

/// A TCP connection holding one of the server's connection slots until it closes.
pub struct Limited {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Connections this process may hold open: [`limits::CONNECTIONS_MAX`], or fewer when the
/// descriptor limit is lower (half of what is left after the storage and peer reserve), so
/// idle connections can never take the descriptors the server needs.
fn connections_max() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let soft = if read {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else {
        limits::CONNECTIONS_MAX
    };
    let spare = soft.saturating_sub(limits::DESCRIPTORS_RESERVED) / 2;
    limits::CONNECTIONS_MAX.min(spare.max(1))
}

/// The accepted connections of `listener` (TCP_NODELAY, keepalive), each holding a slot.
/// A failing accept (out of descriptors) backs off instead of spinning.
pub fn limited(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<Limited>> + Send + 'static {
    let max = connections_max();
    let slots = Arc::new(Semaphore::new(max));
    let refused = Arc::new(AtomicU64::new(0));
    futures::stream::unfold(listener, move |listener| {
        let (slots, refused) = (slots.clone(), refused.clone());
        async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        let n = refused.fetch_add(1, Ordering::Relaxed);
                        if (n + 1).is_power_of_two() {
                            tracing::warn!(error = %e, failures = n + 1, "accept failed");
                        }
                        let pause = std::time::Duration::from_millis(limits::ACCEPT_BACKOFF_MS);
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    // Closing at once frees the descriptor; say so now and then.
                    let n = refused.fetch_add(1, Ordering::Relaxed);
                    if (n + 1).is_power_of_two() {
                        tracing::warn!(
                            refused = n + 1,
                            limit = max,
                            "connection refused: the server's connection limit is reached"
                        );
                    }
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                return Some((
                    Ok(Limited {
                        stream,
                        _slot: slot,
                    }),
                    listener,
                ));
            }
        }
    })
}
