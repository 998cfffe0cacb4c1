//! The metric names: the stable column names of the metric tables.

/// One forecast-quality metric; see the module docs of [`crate::metrics`] for each formula and aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Mean absolute error (fev `MAE`).
    Mae,
    /// Root mean squared error (fev `RMSE`).
    Rmse,
    /// Symmetric mean absolute percentage error as a fraction in [0, 2] (fev `SMAPE`).
    Smape,
    /// Mean absolute scaled error, seasonal scale from the history up to the cutoff (fev `MASE`).
    Mase,
    /// Weighted quantile loss over every quantile level given (fev `WQL`).
    Wql,
    /// Scaled CRPS from the quantiles, per series (utilsforecast `scaled_crps`).
    ScaledCrps,
    /// Coverage of the central interval of this level in % (utilsforecast `coverage`).
    Coverage(u32),
    /// CRPS of the sample paths, energy form.
    CrpsSamples,
    /// Fraction of steps whose direction from the last observed value is right.
    DirectionAccuracy,
}

impl Metric {
    /// The column name: `mae`, `rmse`, `smape`, `mase`, `wql`, `scaled_crps`, `coverage_80`, `crps_samples`,
    /// `direction_accuracy`.
    pub fn name(&self) -> String {
        match self {
            Metric::Mae => "mae".into(),
            Metric::Rmse => "rmse".into(),
            Metric::Smape => "smape".into(),
            Metric::Mase => "mase".into(),
            Metric::Wql => "wql".into(),
            Metric::ScaledCrps => "scaled_crps".into(),
            Metric::Coverage(level) => format!("coverage_{level}"),
            Metric::CrpsSamples => "crps_samples".into(),
            Metric::DirectionAccuracy => "direction_accuracy".into(),
        }
    }

    /// The metric a column name names (the inverse of [`Metric::name`]).
    pub fn from_name(name: &str) -> Option<Metric> {
        Some(match name {
            "mae" => Metric::Mae,
            "rmse" => Metric::Rmse,
            "smape" => Metric::Smape,
            "mase" => Metric::Mase,
            "wql" => Metric::Wql,
            "scaled_crps" => Metric::ScaledCrps,
            "crps_samples" => Metric::CrpsSamples,
            "direction_accuracy" => Metric::DirectionAccuracy,
            other => Metric::Coverage(other.strip_prefix("coverage_")?.parse().ok()?),
        })
    }

    /// Whether lower is better (false for coverage and direction accuracy, where neither or higher is).
    pub fn lower_is_better(&self) -> bool {
        !matches!(self, Metric::Coverage(_) | Metric::DirectionAccuracy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let all = [
            Metric::Mae,
            Metric::Rmse,
            Metric::Smape,
            Metric::Mase,
            Metric::Wql,
            Metric::ScaledCrps,
            Metric::Coverage(80),
            Metric::Coverage(95),
            Metric::CrpsSamples,
            Metric::DirectionAccuracy,
        ];
        for m in all {
            assert_eq!(Metric::from_name(&m.name()), Some(m));
        }
        assert_eq!(Metric::Coverage(80).name(), "coverage_80");
        assert_eq!(Metric::from_name("coverage_x"), None);
        assert_eq!(Metric::from_name("mape"), None);
    }
}
