//! Binding for `agentgym-transport`: `GroupSender` / `GroupReceiver` wrappers that convert
//! arguments, release the GIL around every blocking call and map `TransportError` variants onto
//! Python exceptions.
use agentgym_transport::{
    Bytes, GroupReceiver as RustReceiver, GroupSender as RustSender, ReceiverOptions, Secret,
    SenderOptions, TransportError as RustError,
};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::conversion::duration;
use crate::errors::AgentGymError;

create_exception!(
    _core,
    TransportError,
    AgentGymError,
    "A group transport failed."
);
create_exception!(
    _core,
    TransportTimeout,
    TransportError,
    "No credit (or acknowledgement) arrived in time; nothing was queued."
);
create_exception!(
    _core,
    TransportClosed,
    TransportError,
    "The sender or receiver is closed."
);
create_exception!(
    _core,
    TransportLinkDown,
    TransportError,
    "flush(while_linked=True): the link to the receiver is down with groups unacknowledged."
);
create_exception!(
    _core,
    ProtocolError,
    TransportError,
    "The peer speaks another protocol version or sent an unacceptable message."
);
create_exception!(
    _core,
    AuthenticationError,
    TransportError,
    "The peer's messages are unsigned or signed with another secret."
);
create_exception!(
    _core,
    TransportSocketError,
    TransportError,
    "The socket layer failed (address in use, ...)."
);
create_exception!(
    _core,
    InvalidEndpointError,
    TransportError,
    "The endpoint is not tcp://HOST:PORT or ipc://PATH."
);
create_exception!(
    _core,
    TransportForkedError,
    TransportError,
    "Used in a forked child; create a new one there."
);
create_exception!(
    _core,
    TransportRuntimeError,
    TransportError,
    "The background runtime could not start."
);

pub(crate) fn transport_error(e: RustError) -> PyErr {
    let msg = e.to_string();
    match e {
        RustError::Timeout { .. } => TransportTimeout::new_err(msg),
        RustError::Closed => TransportClosed::new_err(msg),
        RustError::LinkDown { .. } => TransportLinkDown::new_err(msg),
        RustError::Protocol { .. } => ProtocolError::new_err(msg),
        RustError::Unauthenticated { .. } => AuthenticationError::new_err(msg),
        RustError::WeakSecret { .. } => pyo3::exceptions::PyValueError::new_err(msg),
        RustError::Socket { .. } => TransportSocketError::new_err(msg),
        RustError::InvalidEndpoint { .. } => InvalidEndpointError::new_err(msg),
        RustError::Forked { .. } => TransportForkedError::new_err(msg),
        RustError::Runtime(_) => TransportRuntimeError::new_err(msg),
        _ => TransportError::new_err(msg),
    }
}

/// Rollout side: streams encoded groups to a `GroupReceiver` under credit.
#[pyclass(frozen, module = "agentgym_rl._core")]
struct GroupSender {
    inner: RustSender,
}

#[pymethods]
impl GroupSender {
    #[new]
    #[pyo3(signature = (endpoint, sender_id=None, *, heartbeat_s=0.5, peer_timeout_s=3.0, handshake_timeout_s=2.0, max_reconnect_interval_s=1.0, secret=None))]
    fn new(
        endpoint: &str,
        sender_id: Option<String>,
        heartbeat_s: f64,
        peer_timeout_s: f64,
        handshake_timeout_s: f64,
        max_reconnect_interval_s: f64,
        secret: Option<PyBackedBytes>,
    ) -> PyResult<Self> {
        let options = SenderOptions {
            sender_id,
            heartbeat_interval: duration(heartbeat_s)?,
            peer_timeout: duration(peer_timeout_s)?,
            handshake_timeout: duration(handshake_timeout_s)?,
            max_reconnect_interval: duration(max_reconnect_interval_s)?,
            secret: secret_of(secret)?,
        };
        let inner = RustSender::connect(endpoint, options).map_err(transport_error)?;
        Ok(GroupSender { inner })
    }

    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    #[getter]
    fn sender_id(&self) -> &str {
        self.inner.sender_id()
    }

    /// Send one group (`bytes` are shared with Rust without a copy; other buffers are copied).
    #[pyo3(signature = (payload, timeout_s=60.0))]
    fn send(&self, py: Python<'_>, payload: PyBackedBytes, timeout_s: f64) -> PyResult<u64> {
        let timeout = duration(timeout_s)?;
        let payload = Bytes::from_owner(payload);
        py.detach(|| self.inner.send(&payload, timeout))
            .map_err(transport_error)
    }

    #[pyo3(signature = (timeout_s=60.0, *, while_linked=false))]
    fn flush(&self, py: Python<'_>, timeout_s: f64, while_linked: bool) -> PyResult<()> {
        let timeout = duration(timeout_s)?;
        py.detach(|| {
            if while_linked {
                self.inner.flush_while_linked(timeout)
            } else {
                self.inner.flush(timeout)
            }
        })
        .map_err(transport_error)
    }

    #[pyo3(signature = (timeout_s=60.0))]
    fn wait_connected(&self, py: Python<'_>, timeout_s: f64) -> PyResult<()> {
        let timeout = duration(timeout_s)?;
        py.detach(|| self.inner.wait_connected(timeout))
            .map_err(transport_error)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("sent", s.sent)?;
        d.set_item("acked", s.acked)?;
        d.set_item("unacked", s.unacked())?;
        d.set_item("resent", s.resent)?;
        d.set_item("handshakes", s.handshakes)?;
        d.set_item("credit", s.credit)?;
        d.set_item("connected", s.connected)?;
        d.set_item("unauthenticated", s.unauthenticated)?;
        Ok(d)
    }

    fn close(&self, py: Python<'_>) {
        py.detach(|| self.inner.close());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) {
        self.close(py);
    }

    fn __repr__(&self) -> String {
        format!(
            "GroupSender(endpoint={:?}, sender_id={:?})",
            self.inner.endpoint(),
            self.inner.sender_id()
        )
    }
}

/// Learner side: binds a ROUTER and receives groups from any number of senders.
#[pyclass(frozen, module = "agentgym_rl._core")]
struct GroupReceiver {
    inner: RustReceiver,
}

impl GroupReceiver {
    fn take(
        &self,
        py: Python<'_>,
        timeout_s: f64,
    ) -> PyResult<Option<agentgym_transport::Delivery>> {
        let timeout = duration(timeout_s)?;
        py.detach(|| self.inner.recv(timeout))
            .map_err(transport_error)
    }
}

#[pymethods]
impl GroupReceiver {
    #[new]
    #[pyo3(signature = (bind="tcp://127.0.0.1:0", *, window=16, secret=None))]
    fn new(
        py: Python<'_>,
        bind: &str,
        window: u32,
        secret: Option<PyBackedBytes>,
    ) -> PyResult<Self> {
        let options = ReceiverOptions {
            window,
            secret: secret_of(secret)?,
        };
        let inner = py
            .detach(|| RustReceiver::bind(bind, options))
            .map_err(transport_error)?;
        Ok(GroupReceiver { inner })
    }

    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    /// `(sender_id, payload)`, or `None` when nothing arrived within the timeout.
    #[pyo3(signature = (timeout_s=1.0))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout_s: f64,
    ) -> PyResult<Option<(String, Bound<'py, PyBytes>)>> {
        Ok(self
            .take(py, timeout_s)?
            .map(|d| (d.sender_id, PyBytes::new(py, &d.payload))))
    }

    /// `(sender_id, seq, payload)`, or `None` when nothing arrived within the timeout.
    #[pyo3(signature = (timeout_s=1.0))]
    fn recv_seq<'py>(
        &self,
        py: Python<'py>,
        timeout_s: f64,
    ) -> PyResult<Option<(String, u64, Bound<'py, PyBytes>)>> {
        Ok(self
            .take(py, timeout_s)?
            .map(|d| (d.sender_id, d.seq, PyBytes::new(py, &d.payload))))
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("received", s.received)?;
        d.set_item("delivered", s.delivered)?;
        d.set_item("duplicates", s.duplicates)?;
        d.set_item("gaps", s.gaps)?;
        d.set_item("handshakes", s.handshakes)?;
        d.set_item("rejected", s.rejected)?;
        d.set_item("unauthenticated", s.unauthenticated)?;
        d.set_item("senders", s.senders)?;
        Ok(d)
    }

    /// `(peer address, reason)` of each message refused for want of a valid signature since
    /// the last call (the first 64; `stats()["unauthenticated"]` counts them all).
    fn take_refusals(&self) -> Vec<(String, String)> {
        self.inner
            .take_refusals()
            .into_iter()
            .map(|r| (r.peer, r.reason.to_string()))
            .collect()
    }

    fn close(&self, py: Python<'_>) {
        py.detach(|| self.inner.close());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) {
        self.close(py);
    }

    fn __repr__(&self) -> String {
        format!("GroupReceiver(endpoint={:?})", self.inner.endpoint())
    }
}

fn secret_of(bytes: Option<PyBackedBytes>) -> PyResult<Option<Secret>> {
    bytes
        .map(|b| Secret::new(&b))
        .transpose()
        .map_err(transport_error)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "TRANSPORT_PROTOCOL_VERSION",
        agentgym_transport::PROTOCOL_VERSION,
    )?;
    m.add("TransportError", py.get_type::<TransportError>())?;
    m.add("TransportTimeout", py.get_type::<TransportTimeout>())?;
    m.add("TransportLinkDown", py.get_type::<TransportLinkDown>())?;
    m.add("TransportClosed", py.get_type::<TransportClosed>())?;
    m.add("ProtocolError", py.get_type::<ProtocolError>())?;
    m.add("AuthenticationError", py.get_type::<AuthenticationError>())?;
    m.add(
        "TransportSocketError",
        py.get_type::<TransportSocketError>(),
    )?;
    m.add(
        "InvalidEndpointError",
        py.get_type::<InvalidEndpointError>(),
    )?;
    m.add(
        "TransportForkedError",
        py.get_type::<TransportForkedError>(),
    )?;
    m.add(
        "TransportRuntimeError",
        py.get_type::<TransportRuntimeError>(),
    )?;
    m.add_class::<GroupSender>()?;
    m.add_class::<GroupReceiver>()?;
    Ok(())
}
