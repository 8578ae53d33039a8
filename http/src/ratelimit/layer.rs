//! The tower layer: the per-client-IP limit in front of the HTTP service.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::{IntoResponse as _, Response};
use futures_util::future::{ready, Either, Ready};

use super::client::ClientIp;
use super::{retry_after_secs, HttpLimiter};
use crate::refusal::Refusal;
use seedd_core::metrics::Metrics;

/// Tower layer: per-client-IP rate limit in front of a service (see [`IpRateLimit`]).
#[derive(Clone)]
pub struct IpRateLimitLayer {
    limiter: HttpLimiter,
    rejected: prometheus::IntCounter,
}

impl IpRateLimitLayer {
    pub fn new(limiter: HttpLimiter, metrics: &Metrics) -> Self {
        IpRateLimitLayer {
            limiter,
            rejected: metrics.http_rate_limited.with_label_values(&["ip"]),
        }
    }
}

impl<S> tower::Layer<S> for IpRateLimitLayer {
    type Service = IpRateLimit<S>;

    fn layer(&self, inner: S) -> IpRateLimit<S> {
        IpRateLimit {
            inner,
            limiter: self.limiter.clone(),
            rejected: self.rejected.clone(),
        }
    }
}

/// Answers 429 + `Retry-After` for a client over its per-IP rate, without calling the inner
/// service. The TCP peer comes from the `ConnectInfo<SocketAddr>` extension that
/// [`crate::serve`] sets; requests without it pass unchecked. Inserts [`ClientIp`].
#[derive(Clone)]
pub struct IpRateLimit<S> {
    inner: S,
    limiter: HttpLimiter,
    rejected: prometheus::IntCounter,
}

impl<S, B> tower::Service<Request<B>> for IpRateLimit<S>
where
    S: tower::Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
            let ip = self.limiter.client_ip(*peer, req.headers());
            if let Err(wait) = self.limiter.check_ip(ip) {
                self.rejected.inc();
                let refusal = Refusal::IpRateLimited {
                    retry_after_secs: retry_after_secs(wait),
                };
                return Either::Right(ready(Ok(refusal.into_response())));
            }
            req.extensions_mut().insert(ClientIp(ip));
        }
        Either::Left(self.inner.call(req))
    }
}
