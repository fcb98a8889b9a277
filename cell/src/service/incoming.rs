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

/// A connection whose TLS handshake finished (tonic reads the peer's proven certificates
/// from it: `TlsConnectInfo`).
pub type TlsConnection = tokio_rustls::server::TlsStream<Limited>;

type Handshake = futures::future::BoxFuture<'static, Option<TlsConnection>>;

/// The connections of `listener` after their TLS handshake with the settings `tls` holds
/// when each one is accepted (a replaced certificate serves the next connection). Every
/// handshake runs on its own, cut after [`limits::TLS_HANDSHAKE_TIMEOUT_MS`]; one that fails
/// closes its connection and is logged at debug.
pub fn tls(listener: tokio::net::TcpListener, tls: Arc<crate::tls::Tls>) -> TlsIncoming {
    TlsIncoming {
        accepted: Box::pin(limited(listener)),
        handshakes: futures::stream::FuturesUnordered::new(),
        tls,
    }
}

/// See [`tls`].
pub struct TlsIncoming {
    accepted: Pin<Box<dyn futures::Stream<Item = std::io::Result<Limited>> + Send>>,
    handshakes: futures::stream::FuturesUnordered<Handshake>,
    tls: Arc<crate::tls::Tls>,
}

impl TlsIncoming {
    fn start(&self, connection: Limited) -> Handshake {
        let config = self.tls.server_config();
        Box::pin(async move {
            let Some(config) = config else {
                tracing::warn!("tls connection refused: the server has no certificate");
                return None;
            };
            let accept = tokio_rustls::TlsAcceptor::from(config).accept(connection);
            let limit = std::time::Duration::from_millis(limits::TLS_HANDSHAKE_TIMEOUT_MS);
            match tokio::time::timeout(limit, accept).await {
                Ok(Ok(stream)) => Some(stream),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "tls handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!("tls handshake timed out");
                    None
                }
            }
        })
    }
}

impl futures::Stream for TlsIncoming {
    type Item = std::io::Result<TlsConnection>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        use futures::StreamExt;
        // Start the handshake of every connection accepted by now.
        while let Poll::Ready(next) = self.accepted.as_mut().poll_next(cx) {
            match next {
                Some(Ok(connection)) => {
                    let handshake = self.start(connection);
                    self.handshakes.push(handshake);
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
        loop {
            match self.handshakes.poll_next_unpin(cx) {
                Poll::Ready(Some(Some(stream))) => return Poll::Ready(Some(Ok(stream))),
                Poll::Ready(Some(None)) => continue,
                // Nothing in flight: the accept above registered the wake-up.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}
