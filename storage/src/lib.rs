//! Strata storage.
