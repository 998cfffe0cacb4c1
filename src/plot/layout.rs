//! Where things go on a chart: a header (title, subtitle, legend), a grid of equal panels, and a footer of notes.
//! The default size grows with the number of panels; a size given with `--plot-size` is divided among them.

use anyhow::bail;

/// Height of the header (title, subtitle, legend).
pub const HEADER: u32 = 80;
/// Height of one line of notes under the panels.
pub const NOTE_LINE: u32 = 18;
/// Space left and right of the grid.
pub const SIDE: u32 = 12;
/// Inside a panel: its title, the x axis labels (and description), the y axis labels, the margin around.
pub const PANEL_CAPTION: u32 = 22;
pub const X_LABELS: u32 = 40;
pub const Y_LABELS: u32 = 56;
pub const PANEL_MARGIN: u32 = 8;
/// The smallest panel that still reads.
pub const MIN_PANEL: (u32, u32) = (240, 160);
/// The largest image side: a PNG is drawn at twice its size, so one of 4000 × 4000 holds 192 MB of pixels while it
/// is drawn.
pub const MAX_SIDE: u32 = 4000;

/// The chart's size and the panel grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub size: (u32, u32),
    pub cols: usize,
    pub rows: usize,
    /// Size of each panel.
    pub panel: (u32, u32),
    /// Height of the notes under the grid.
    pub footer: u32,
}

impl Layout {
    /// The layout of `panels` panels and `notes` lines of notes, in `size` (default: from the panel count).
    pub fn new(panels: usize, notes: usize, size: Option<(u32, u32)>) -> anyhow::Result<Layout> {
        let panels = panels.max(1);
        let cols = match panels {
            1 => 1,
            2..=4 => 2,
            5..=9 => 3,
            _ => 4,
        };
        let rows = panels.div_ceil(cols);
        let footer = if notes > 0 { notes as u32 * NOTE_LINE + 8 } else { 0 };
        let chrome = (2 * SIDE, HEADER + footer);
        let panel = match size {
            None => match cols {
                1 => (960, 440),
                2 => (640, 320),
                3 => (520, 300),
                _ => (440, 280),
            },
            Some((w, h)) => {
                if w > MAX_SIDE || h > MAX_SIDE {
                    bail!("--plot-size {w}x{h} is larger than {MAX_SIDE} pixels a side; give a smaller size");
                }
                let panel =
                    (w.saturating_sub(chrome.0) / cols as u32, h.saturating_sub(chrome.1) / rows as u32);
                if panel.0 < MIN_PANEL.0 || panel.1 < MIN_PANEL.1 {
                    let need = (MIN_PANEL.0 * cols as u32 + chrome.0, MIN_PANEL.1 * rows as u32 + chrome.1);
                    bail!(
                        "--plot-size {w}x{h} leaves {}x{} pixels for each of {panels} panels ({cols} × {rows}); give at \
                         least {}x{}, or fewer panels with --plot-panels",
                        panel.0,
                        panel.1,
                        need.0,
                        need.1
                    );
                }
                panel
            }
        };
        let size = size.unwrap_or((panel.0 * cols as u32 + chrome.0, panel.1 * rows as u32 + chrome.1));
        Ok(Layout { size, cols, rows, panel, footer })
    }

    /// Top-left corner of panel `i` (row by row).
    pub fn panel_origin(&self, i: usize) -> (i32, i32) {
        let (c, r) = ((i % self.cols) as u32, (i / self.cols) as u32);
        ((SIDE + c * self.panel.0) as i32, (HEADER + r * self.panel.1) as i32)
    }

    /// Top of the notes.
    pub fn footer_origin(&self) -> (i32, i32) {
        (SIDE as i32, (HEADER + self.rows as u32 * self.panel.1) as i32 + 4)
    }

    /// The plotting area inside a panel (what its axes span), in pixels.
    pub fn plot_area(&self) -> (u32, u32) {
        (
            self.panel.0.saturating_sub(Y_LABELS + 2 * PANEL_MARGIN),
            self.panel.1.saturating_sub(PANEL_CAPTION + X_LABELS + 2 * PANEL_MARGIN),
        )
    }
}

/// Parses `--plot-size WxH` (e.g. `1200x800`).
pub fn parse_size(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--plot-size `{text}` is not a size; give WIDTHxHEIGHT in pixels, e.g. 1200x800");
    let (w, h) = text.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    if w == 0 || h == 0 {
        return Err(bad());
    }
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sizes_grow_with_the_panels() {
        let one = Layout::new(1, 0, None).unwrap();
        assert_eq!((one.cols, one.rows, one.size), (1, 1, (984, 440 + HEADER)));
        let five = Layout::new(5, 1, None).unwrap();
        assert_eq!((five.cols, five.rows), (3, 2));
        assert_eq!(five.size, (3 * 520 + 24, 2 * 300 + HEADER + 26));
        assert_eq!(five.panel_origin(4), (12 + 520, HEADER as i32 + 300));
        assert_eq!(Layout::new(12, 0, None).unwrap().cols, 4);
    }

    #[test]
    fn a_given_size_is_shared_and_must_leave_room() {
        let l = Layout::new(4, 0, Some((1200, 800))).unwrap();
        assert_eq!((l.size, l.panel), ((1200, 800), (588, 360)));
        let e = Layout::new(4, 0, Some((400, 300))).unwrap_err().to_string();
        assert!(e.starts_with("--plot-size 400x300 leaves 188x110 pixels for each of 4 panels (2 × 2); give at least 504x400"), "{e}");
        assert!(Layout::new(1, 0, Some((4001, 100))).unwrap_err().to_string().contains("larger than 4000"));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1200x800"), Ok((1200, 800)));
        assert_eq!(parse_size(" 640X480 "), Ok((640, 480)));
        assert!(parse_size("1200").unwrap_err().contains("WIDTHxHEIGHT"));
        assert!(parse_size("0x10").is_err());
        assert!(parse_size("ax10").is_err());
    }
}
