//! The tools beside the product: `settle demo` (the console on a realistic sandbox) and `settle
//! sim` (a destination written from the manual, to try settle and its drills against). Only the
//! command line and the tools themselves name them: the product never depends on them.
//!
//! Rooms: `demo/` the console on a realistic week, `sim/` a destination written from the manual.

pub mod demo;
pub mod sim;
