//! The remote address of each connection a ROUTER accepted, for reporting refused messages.
use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, Stream, StreamExt};
use zeromq::SocketEvent;

/// Connections whose address is remembered for reporting refusals (the oldest are forgotten:
/// the ROUTER does not report disconnections).
const MAX_ADDRESSES: usize = 1024;

/// The remote address of each connection, by routing id, from the socket's monitor events.
pub(crate) struct AddressBook {
    events: BoxStream<'static, SocketEvent>,
    by_id: HashMap<Bytes, String>,
    order: VecDeque<Bytes>,
}

impl AddressBook {
    /// A book fed by the socket's monitor (take it before binding).
    pub(crate) fn new(events: impl Stream<Item = SocketEvent> + Send + 'static) -> Self {
        AddressBook {
            events: events.boxed(),
            by_id: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Wait for the next monitor event and note it (pending forever once the socket is gone).
    pub(crate) async fn update(&mut self) {
        match self.events.next().await {
            Some(event) => self.on_event(event),
            None => std::future::pending().await,
        }
    }

    fn on_event(&mut self, event: SocketEvent) {
        if let SocketEvent::Accepted(endpoint, peer) = event {
            let id = Bytes::copy_from_slice(&peer);
            if self
                .by_id
                .insert(id.clone(), endpoint.to_string())
                .is_none()
            {
                self.order.push_back(id);
            }
            while self.order.len() > MAX_ADDRESSES {
                if let Some(old) = self.order.pop_front() {
                    self.by_id.remove(&old);
                }
            }
        }
    }

    /// The address of the connection with this routing id, or `unknown`.
    pub(crate) fn of(&mut self, routing_id: &Bytes) -> String {
        // The accept event may still be queued behind the peer's first message.
        while let Some(Some(event)) = self.events.next().now_or_never() {
            self.on_event(event);
        }
        self.by_id
            .get(routing_id)
            .cloned()
            .unwrap_or_else(|| "unknown".to_owned())
    }
}
