//! wozkit-core: the study format, its loader and validator, the dialogue engine and the event
//! types. Pure: no tokio, no clock and no global randomness (time and a seeded RNG are passed in),
//! so every session can be reproduced from its seed and commands. The one database is the study's
//! own read-only tables (`database`), loaded with the study; what a query found is logged.

#![forbid(unsafe_code)]

pub mod copilot;
pub mod database;
pub mod datasets;
pub mod engine;
pub mod evaluation;
pub mod event;
pub mod expr;
pub mod goal_score;
pub mod goals;
pub mod graph;
pub mod html;
pub mod judges;
pub mod language;
pub mod load;
pub mod model;
pub mod platforms;
pub mod priors;
pub mod questions;
pub mod scenario;
pub mod sim;
pub mod simulated_users;
pub mod slots;
pub mod systems;
