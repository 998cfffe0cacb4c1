//! Host numerics shared by the model families (f64 where the reference uses it):
//!
//! * [`scaler`]: toto's causal patch scaler as running state;
//! * [`rope`]: the rotary and xPos tables the graphs take as inputs;
//! * [`sum`]: torch's CPU reduction order, for sums that must equal torch bit for bit;
//! * [`quantile`]: `torch.quantile` of sample paths (linear interpolation, f32);
//! * [`wall_clock`]: a civil date-time as written (a request's per-point timestamps).

pub mod quantile;
pub mod rope;
pub mod scaler;
pub mod sum;
pub mod wall_clock;
