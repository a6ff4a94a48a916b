//! The broker's view of the cluster metadata: the latest [`MetadataImage`] applied from
//! the controller's replicated metadata log, published atomically.
//!
//! A node that runs the controller quorum publishes from its own Raft state machine; a
//! broker-only node pulls committed records from a controller
//! ([`crate::controller::follower`]). Either way readers call [`MetadataCache::current`]
//! for a consistent, immutable snapshot (never a half-applied batch), and tasks that act
//! on changes (the replica manager, coordinators) wait on [`MetadataCache::subscribe`].

pub mod image;
pub mod listener;
pub mod records;

pub use image::{ApplyOutcome, ImageSnapshot, MetadataImage, TopicImage};
pub use records::{
    BrokerRegistrationRecord, Endpoint, MetadataBatch, MetadataRecord, PartitionRecord, TopicId,
};

use arc_swap::ArcSwap;
use std::sync::Arc;
use tokio::sync::watch;

/// The latest metadata image, shared by everything in the broker.
#[derive(Debug)]
pub struct MetadataCache {
    image: ArcSwap<MetadataImage>,
    changed: watch::Sender<u64>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache::new()
    }
}

impl MetadataCache {
    /// An empty cache (no cluster id, no brokers, no topics).
    pub fn new() -> MetadataCache {
        let (changed, _) = watch::channel(0);
        MetadataCache { image: ArcSwap::from_pointee(MetadataImage::default()), changed }
    }

    /// The current image.
    pub fn current(&self) -> Arc<MetadataImage> {
        self.image.load_full()
    }

    /// Publishes a newer image. Images only move forward: an image older than the
    /// current one is a caller bug and is dropped.
    pub fn publish(&self, image: Arc<MetadataImage>) {
        let index = image.applied_index;
        let current = self.image.load();
        if index < current.applied_index {
            tracing::error!(
                index,
                current = current.applied_index,
                "refusing to publish an older metadata image"
            );
            return;
        }
        drop(current);
        self.image.store(image);
        self.changed.send_replace(index);
    }

    /// A receiver that sees the applied index of each published image.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until `ready(image)` holds for a published image, or `timeout` passes;
    /// returns the last image either way (the caller checks it again).
    pub async fn wait_for(
        &self,
        timeout: std::time::Duration,
        mut ready: impl FnMut(&MetadataImage) -> bool,
    ) -> Arc<MetadataImage> {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let image = self.current();
            if ready(&image) {
                return image;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.current(),
            }
        }
    }
}
