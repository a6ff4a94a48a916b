//! Strata broker.
