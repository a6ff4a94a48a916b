//! Tests of the group coordinator under deterministic time.
