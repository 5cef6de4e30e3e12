//! Amazon Mechanical Turk through the official AWS SDK for Rust.
