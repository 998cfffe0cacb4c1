//! Forecast-quality metrics (filled in by the metrics work).
