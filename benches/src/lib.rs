//! Placeholder until the bench harness lands.
