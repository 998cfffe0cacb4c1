//! Host numerics shared by both model families (f64 where the reference uses it):
//!
//! * [`scaler`]: toto's causal patch scaler as running state;
//! * [`rope`]: the rotary and xPos tables the graphs take as inputs;
//! * [`sum`]: torch's CPU reduction order, for sums that must equal torch bit for bit.

pub mod rope;
pub mod scaler;
pub mod sum;
