//! [`Mean`]: a running sum and count, the one accumulator every metric module uses (a leaf, so the per-metric
//! modules and the window that combines them do not import each other).

/// A running sum and count; its mean is `None` when nothing was added or the mean is not finite.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Mean {
    pub total: f64,
    pub count: usize,
}

impl Mean {
    pub fn add(&mut self, x: f64) {
        self.total += x;
        self.count += 1;
    }

    /// Adds `x` only when finite: fev's `_safemean` leaves NaN and ±Inf terms out of the mean.
    pub fn add_if_finite(&mut self, x: f64) {
        if x.is_finite() {
            self.add(x);
        }
    }

    pub fn merge(&mut self, other: &Mean) {
        self.total += other.total;
        self.count += other.count;
    }

    pub fn mean(&self) -> Option<f64> {
        let m = self.total / self.count as f64;
        (self.count > 0 && m.is_finite()).then_some(m)
    }
}
