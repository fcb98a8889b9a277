//! Accepted connections, bounded by the process's connection budget (`crate::budget`: one
//! for every listener of the process, with a share per remote address): past it a new
//! connection is closed at once (and logged now and then), so idle or abandoned
//! connections cannot starve the accept loop or the descriptor table.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::budget::{Budget, Slot};
use crate::limits;

/// A TCP connection holding one of the server's connection slots until it closes.
pub struct Limited {
    stream: TcpStream,
    _slot: Slot,
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

/// The accepted connections of `listener` (TCP_NODELAY), each holding a slot of the
/// process's connection budget ([`Budget::process`]). A failing accept (out of
/// descriptors) backs off instead of spinning.
pub fn limited(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<Limited>> + Send + 'static {
    let budget = Budget::process();
    futures::stream::unfold(listener, move |listener| {
        let budget = budget.clone();
        async move {
            let (stream, _peer, slot) = budget.accept(&listener, "grpc").await;
            Some((
                Ok(Limited {
                    stream,
                    _slot: slot,
                }),
                listener,
            ))
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
