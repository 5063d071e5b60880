//! The AgentGym HTTP transport: one keep-alive `reqwest` client per server.
//!
//! Idle connections are dropped before uvicorn's 5 s keep-alive closes them from the other end
//! (a POST written into a socket the server just closed fails in a way that cannot be told apart
//! from a lost step). Errors are classified by whether the request can have reached the server:
//! a refused connection provably did not, anything after connecting may have.
//!
//! Health probes walk [`dialect::health_paths`]: a path the server does not have (404/405) moves
//! on to the next, and the one that answered is remembered for later probes.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::Dialect;
use crate::dialect::{self, HttpRequest};
use crate::error::{EnvPoolError, Result};
use crate::message::{DecodeError, Op, Reply};

pub(crate) struct HttpBackend {
    base: String,
    dialect: Dialect,
    client: reqwest::Client,
    /// Index into the dialect's health paths of the one this server answers.
    health_path: AtomicUsize,
}

impl HttpBackend {
    pub(crate) fn new(
        address: &str,
        dialect: Dialect,
        max_inflight: usize,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            .pool_idle_timeout(idle_timeout)
            .pool_max_idle_per_host(max_inflight)
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .map_err(|e| EnvPoolError::Config(format!("{address}: HTTP client: {e}")))?;
        Ok(HttpBackend {
            base: address.trim_end_matches('/').to_owned(),
            dialect,
            client,
            health_path: AtomicUsize::new(0),
        })
    }

    /// One request/reply. The caller applies the deadline.
    pub(crate) async fn call(&self, op: &Op) -> Result<Reply> {
        if *op == Op::Health {
            return self.health().await;
        }
        let req = dialect::request(self.dialect, op);
        let (status, body) = self.send(op, req).await?;
        self.reply(op, status, &body)
    }

    /// Probe the health paths from the remembered one on; see the module doc.
    async fn health(&self) -> Result<Reply> {
        let paths = dialect::health_paths(self.dialect);
        let mut i = self
            .health_path
            .load(Ordering::Relaxed)
            .min(paths.len() - 1);
        loop {
            let req = HttpRequest {
                path: paths[i].to_owned(),
                body: None,
            };
            let (status, body) = self.send(&Op::Health, req).await?;
            if matches!(status, 404 | 405) && i + 1 < paths.len() {
                i += 1;
                self.health_path.store(i, Ordering::Relaxed);
                continue;
            }
            return self.reply(&Op::Health, status, &body);
        }
    }

    async fn send(&self, op: &Op, req: HttpRequest) -> Result<(u16, Vec<u8>)> {
        let url = format!("{}{}", self.base, req.path);
        let builder = match req.body {
            Some(body) => self
                .client
                .post(url)
                .header("content-type", "application/json")
                .body(body),
            None => self.client.get(url),
        };
        let response = builder.send().await.map_err(|e| self.transport(op, &e))?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| self.transport(op, &e))?;
        Ok((status, Vec::from(body)))
    }

    /// The reply (or error) that an HTTP status and body amount to.
    fn reply(&self, op: &Op, status: u16, body: &[u8]) -> Result<Reply> {
        if status != 200 {
            // A 4xx/5xx from a refusal-as-JSON server still carries the message.
            if let Err(DecodeError::Refused { message, code }) =
                dialect::decode(self.dialect, op, body)
            {
                if status < 500 {
                    return Err(EnvPoolError::Refused {
                        server: self.base.clone(),
                        op: op.name(),
                        message,
                        code,
                    });
                }
            }
            return Err(EnvPoolError::HttpStatus {
                server: self.base.clone(),
                op: op.name(),
                status,
            });
        }
        dialect::decode(self.dialect, op, body).map_err(|e| match e {
            DecodeError::Refused { message, code } => EnvPoolError::Refused {
                server: self.base.clone(),
                op: op.name(),
                message,
                code,
            },
            DecodeError::Malformed(detail) => EnvPoolError::Malformed {
                server: self.base.clone(),
                op: op.name(),
                detail,
            },
        })
    }

    fn transport(&self, op: &Op, e: &reqwest::Error) -> EnvPoolError {
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            source = s.source();
        }
        EnvPoolError::Connection {
            server: self.base.clone(),
            op: op.name(),
            detail,
            // Connect errors (refused, unreachable, connect timeout) happen before a byte of
            // the request is written.
            sent: !e.is_connect(),
        }
    }
}
