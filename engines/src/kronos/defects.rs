//! Planted defects: test-only switches that break one thing upstream does, so the equivalence tests can show they
//! would catch it (issue 34, "Planted defects fail"). Compiled only into the crate's tests (`cfg(test)`); in every
//! other build [`planted`] is a constant with every switch off. The switches are per thread, so tests running
//! at once do not see each other's.

/// The defects a test can plant on the host side (the dependency query ×√D is a graph defect:
/// `exporter::kronos::graph::planted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Defects {
    /// Token bits read most significant first.
    pub bits_msb_first: bool,
    /// The dependency layer causal, as in training mode: the s2 query sees window position 0 only.
    pub dep_causal: bool,
    /// Each input row takes the next row's stamp.
    pub next_stamp: bool,
    /// The standard deviation with ddof 1.
    pub std_ddof1: bool,
    /// The temperature divides the logits after the top-k / top-p filter.
    pub temperature_after_filter: bool,
    /// Top-p keeps the tokens whose cumulative probability is ≤ top_p, without the right shift.
    pub top_p_no_shift: bool,
    /// The window after the slide starts one token late (max_context − 1 tokens).
    pub slide_off_by_one: bool,
    /// The final decode runs over the generated tokens alone.
    pub final_window_wrong: bool,
}

#[cfg(test)]
thread_local! {
    static PLANTED: std::cell::Cell<Defects> = const { std::cell::Cell::new(Defects {
        bits_msb_first: false,
        dep_causal: false,
        next_stamp: false,
        std_ddof1: false,
        temperature_after_filter: false,
        top_p_no_shift: false,
        slide_off_by_one: false,
        final_window_wrong: false,
    }) };
}

/// The defects planted on this thread (always none outside the crate's tests).
#[inline]
pub fn planted() -> Defects {
    #[cfg(test)]
    {
        PLANTED.with(|p| p.get())
    }
    #[cfg(not(test))]
    {
        Defects::default()
    }
}

/// Plants `d` on this thread until the guard is dropped.
#[cfg(test)]
pub fn plant(d: Defects) -> Planted {
    PLANTED.with(|p| p.set(d));
    Planted
}

/// Clears the planted defects when dropped.
#[cfg(test)]
pub struct Planted;

#[cfg(test)]
impl Drop for Planted {
    fn drop(&mut self) {
        PLANTED.with(|p| p.set(Defects::default()));
    }
}
