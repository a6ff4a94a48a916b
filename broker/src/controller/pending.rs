//! A batch of records being decided, with the image as it will be once they apply, so
//! that later decisions in the same batch see earlier ones (a broker unfenced by the
//! first record can be elected by the next).

use crate::metadata::{MetadataImage, MetadataRecord, PartitionRecord};
use std::sync::Arc;

/// Records decided so far and the image they lead to.
#[derive(Debug)]
pub struct Pending {
    image: MetadataImage,
    records: Vec<MetadataRecord>,
}

impl Pending {
    /// Starts from `image` (the active controller's applied image).
    pub fn new(image: &Arc<MetadataImage>) -> Pending {
        Pending { image: (**image).clone(), records: Vec::new() }
    }

    /// The image with every pushed record applied.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// Adds a record and applies it to the scratch image. Index 0 stands for "not yet
    /// written": only a registration's broker epoch depends on the index, and no
    /// decision in the same batch reads it.
    pub fn push(&mut self, record: MetadataRecord) {
        self.image.apply(0, &record);
        self.records.push(record);
    }

    /// Pushes a partition change if there is one.
    pub fn push_partition(&mut self, change: Option<PartitionRecord>) {
        if let Some(p) = change {
            self.push(MetadataRecord::Partition(p));
        }
    }

    /// True if nothing was decided.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records to write, in order.
    pub fn into_records(self) -> Vec<MetadataRecord> {
        self.records
    }

    /// Every partition of the scratch image, cloned, with its topic's name (to decide
    /// changes while pushing them).
    pub fn partitions(&self) -> Vec<(String, PartitionRecord)> {
        self.image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.clone(), p.clone())))
            .collect()
    }
}
