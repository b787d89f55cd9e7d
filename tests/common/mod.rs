//! Shared test code: the CPU reference interpreter and the random graph
//! builder. Each test binary uses part of it.
#![allow(dead_code)]

pub mod graphs;
pub mod reference;
