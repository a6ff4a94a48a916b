//! RecordBatch v2: zero-copy view, builder, compression.
