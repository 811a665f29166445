//! Queues: submission, dependencies, and asynchronous error delivery.
//!
//! A queue runs its commands on one or more in-order OpenCL queues
//! ("lanes") of its device. An in-order Syrah queue has one lane. An
//! out-of-order one spreads independent commands over up to four
//! lanes (one per core, up to 16, on CPUs), so they can overlap on any
//! driver, puts a command behind a running dependency on that
//! dependency's lane (no event wait needed), and keeps commands held back by an unfinished user event
//! (a host accessor's gate) away from lanes that independent work uses:
//! some drivers stall every later command of a queue behind such a wait.
//!
//! The files, from the bottom up: `state` (the types), `lanes`, `tracking`
//! (commands in flight), `hazards` (copies from ordinary memory on drivers
//! that read it early), `submit` and `wait`.

mod hazards;
mod lanes;
mod state;
mod submit;
mod tracking;
mod wait;

pub(crate) use hazards::HostRead;
pub(crate) use lanes::{next_lane_id, open_lane};
pub use state::{AsyncHandler, GroupLane, Held, Keep, LanePos, LanePositions, Queue, Submitted};
