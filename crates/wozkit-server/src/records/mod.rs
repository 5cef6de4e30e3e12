//! Projections of the store for the researcher: the per-session dialogue log with automatic
//! metrics, and the payment table. Read-only; they never change the store.
