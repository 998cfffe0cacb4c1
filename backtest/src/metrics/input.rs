//! The inputs of one forecast window, and their checks.

use super::MetricError;

/// One forecast window of one series, all f64.
///
/// `history`: the observed values up to and including the cutoff, oldest first (NaN = missing; pass the whole
/// history, not only the model's context: MASE's seasonal scale is taken from it, as fev takes it from all the
/// past data). `actual`: the `H` true values after the cutoff (NaN = missing, left out of every metric).
/// `point`: the `H` point forecasts (the mean for Toto 1.0, the median for Toto 2.0).
#[derive(Debug, Clone, Copy)]
pub struct WindowInput<'a> {
    pub history: &'a [f64],
    pub actual: &'a [f64],
    pub point: &'a [f64],
    pub quantiles: Option<Quantiles<'a>>,
    pub samples: Option<Samples<'a>>,
}

/// Quantile forecasts: `values[level_index * H + step]`, levels strictly inside (0, 1), distinct, any order.
#[derive(Debug, Clone, Copy)]
pub struct Quantiles<'a> {
    pub levels: &'a [f64],
    pub values: &'a [f64],
}

/// Sample paths: `values[sample * H + step]`.
#[derive(Debug, Clone, Copy)]
pub struct Samples<'a> {
    pub count: usize,
    pub values: &'a [f64],
}

impl WindowInput<'_> {
    /// The horizon `H` (the number of actual values).
    pub fn horizon(&self) -> usize {
        self.actual.len()
    }

    /// Checks the shapes and that every forecast is finite.
    pub(crate) fn check(&self) -> Result<(), MetricError> {
        let h = self.horizon();
        if h == 0 {
            return Err(MetricError::EmptyHorizon);
        }
        if self.point.len() != h {
            return Err(MetricError::Length {
                what: "point",
                got: self.point.len(),
                want: h,
                why: "one point forecast per actual value".into(),
            });
        }
        finite("point", self.point)?;
        if let Some(q) = &self.quantiles {
            for (index, &level) in q.levels.iter().enumerate() {
                let repeated = q.levels[..index].contains(&level);
                if !(level > 0.0 && level < 1.0) || repeated {
                    return Err(MetricError::QuantileLevel { index, level });
                }
            }
            let want = checked_product("quantile values", q.levels.len(), h)?;
            if q.values.len() != want {
                return Err(MetricError::Length {
                    what: "quantile values",
                    got: q.values.len(),
                    want,
                    why: format!(
                        "{} levels × horizon {h}, laid out values[level * H + step]",
                        q.levels.len()
                    ),
                });
            }
            finite("quantile", q.values)?;
        }
        if let Some(s) = &self.samples {
            if s.count == 0 {
                return Err(MetricError::NoSamples);
            }
            let want = checked_product("sample values", s.count, h)?;
            if s.values.len() != want {
                return Err(MetricError::Length {
                    what: "sample values",
                    got: s.values.len(),
                    want,
                    why: format!("{} samples × horizon {h}, laid out values[sample * H + step]", s.count),
                });
            }
            finite("sample", s.values)?;
        }
        Ok(())
    }
}

impl Quantiles<'_> {
    /// The forecasts of level `index` over the horizon `h`.
    pub(crate) fn level_row(&self, index: usize, h: usize) -> &[f64] {
        &self.values[index * h..(index + 1) * h]
    }

    /// The index of `level` (within 1e-12: levels such as 1 − 0.1 are not exact in binary).
    pub(crate) fn index_of(&self, level: f64) -> Option<usize> {
        self.levels.iter().position(|&l| (l - level).abs() < 1e-12)
    }
}

fn finite(what: &'static str, values: &[f64]) -> Result<(), MetricError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(MetricError::NonFinite { what, index, value: values[index] }),
        None => Ok(()),
    }
}

fn checked_product(what: &'static str, a: usize, b: usize) -> Result<usize, MetricError> {
    a.checked_mul(b).ok_or(MetricError::Overflow { what, a, b })
}
