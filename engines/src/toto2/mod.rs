//! The host side of Toto 2.0 (toto-2 2.0.0): what the exported graphs leave out, and the driver that runs
//! requests through them.
//!
//! * [`context`]: a request's context as the graphs take it (whole patches, the last patch forward-filled, the
//!   f64 causal scaler, asinh);
//! * [`rope`]: the partial, interleaved RoPE/xPos tables of the time layers, per row and call;
//! * [`quantiles`]: the nine knots to real units (sinh·scale + loc, non-finite clamp, optional cap, sort), the
//!   median, and requested levels (interpolated between knots; outside [0.1, 0.9] an error);
//! * [`engine`]: the engine's graph sets, the planner packing a call onto them and the pool of loaded sets;
//!   [`build`]: `totoc build-engine` for 2.0 bundles;
//! * [`driver`]: one chunk of requests through one shape's graphs, single pass or block decoding with median
//!   feedback ([`driver::forecast_chunk`]).
pub mod build;
pub mod context;
pub mod driver;
pub mod engine;
pub mod golden;
pub mod manifest;
pub mod quantiles;
pub mod rope;
pub mod tensorrt;

pub use driver::{
    check_request, fits, forecast_chunk, BlockRecord, ChunkConfig, Toto2Forecast, Toto2Runners, Toto2Timings,
    Trace,
};
