//! The MeshNode layer (spec 06 §2, §4–§12, §19–§24): [`config`] validates the ZLink root and
//! MeshNode configuration into an immutable plan before anything binds or writes,
//! [`messaging`] dispatches inbound application frames (handler keys, filters, codecs,
//! metadata, error replies), and [`node`] runs MeshNodes over `zlink-transport`: peers,
//! node-direct and channel calls, the command plane, status and shutdown.

pub(crate) mod job_queue;
pub(crate) mod node;
pub(crate) mod peer;

pub use job_queue::JobQueueLimits;
pub(crate) use job_queue::{JobPermit, JobQueue};
