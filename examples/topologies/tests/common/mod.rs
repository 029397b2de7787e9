//! Fixtures shared by the example tests.
#![allow(dead_code)]

use std::time::Duration;

/// 2023-11-14T22:13:20Z: a fixed initial wall clock.
pub const START: i64 = 1_700_000_000_000;
pub const MINUTE: Duration = Duration::from_secs(60);
