//! Draws a chart model ([`Figure`], [`BarChart`]) with plotters, as SVG or PNG.
//!
//! * Both formats draw the same regions (header, panels, notes) with the same code, generic over plotters'
//!   backend ([`Chart::draw`]).
//! * SVG: each region is drawn into its own SVG document, nested in the chart's as
//!   `<svg x=".." y=".." class="header|panel|notes|plot">`, so a chart keeps its structure: one
//!   `class="panel"` element per panel, carrying the panel's title in `aria-label`. Text stays text (the viewer's
//!   sans-serif font).
//! * PNG: drawn into an RGB buffer at twice the size and averaged down 2 × 2 (plotters' bitmap lines are not
//!   anti-aliased), then encoded with the `png` crate. Text is drawn with the embedded Roboto subset
//!   (`font/`), registered with plotters' `ab_glyph` renderer, so no system font, fontconfig or FreeType is
//!   needed.

use std::ops::Range;
use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::bars::BarChart;
use super::layout::{self, HEADER, SIDE};
use super::model::{Axis, Figure, Legend, Panel};
use super::ImageFormat;

/// The embedded font (see `font/README.md`).
const FONT: &[u8] = include_bytes!("font/Roboto-Regular-subset.ttf");

pub const HISTORY: RGBColor = RGBColor(31, 78, 121);
pub const FORECAST: RGBColor = RGBColor(217, 72, 15);
/// Opacity of one band; nested bands add up, so the narrower ones are darker.
pub const BAND_OPACITY: f64 = 0.2;
const TEXT: RGBColor = RGBColor(33, 37, 41);
const MUTED: RGBColor = RGBColor(104, 112, 120);
const GRID: RGBColor = RGBColor(222, 226, 230);
const ORIGIN: RGBColor = RGBColor(173, 181, 189);
/// Bench bars: engines in order, then the reference (gray).
pub const SERIES: [RGBColor; 5] = [
    RGBColor(31, 78, 121),
    RGBColor(217, 72, 15),
    RGBColor(43, 138, 62),
    RGBColor(112, 72, 232),
    RGBColor(194, 37, 92),
];
pub const REFERENCE: RGBColor = RGBColor(134, 142, 150);

/// Renders a chart.
pub fn render(chart: &impl Chart, format: ImageFormat) -> anyhow::Result<Vec<u8>> {
    register_font()?;
    match format {
        ImageFormat::Svg => svg(chart).map(String::into_bytes),
        ImageFormat::Png => png(chart),
    }
}

/// Registers the embedded font as plotters' `sans-serif` (once per process).
fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded chart font cannot be read (this totoc build is broken)"))
    }
}

/// A part of a chart drawn on its own: its place and size (unscaled pixels) and what it is.
#[derive(Debug, Clone)]
pub struct Region {
    pub origin: (i32, i32),
    pub size: (u32, u32),
    pub kind: RegionKind,
    /// Panels: the panel's title (the SVG element's `aria-label`).
    pub label: Option<String>,
}

/// What a region holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// Title, subtitle, legend.
    Header,
    /// Forecast panel `i`.
    Panel(usize),
    /// Notes under the panels.
    Notes,
    /// The bars of the bench chart.
    Plot,
}

impl RegionKind {
    /// The SVG class of the region's element.
    fn class(self) -> &'static str {
        match self {
            RegionKind::Header => "header",
            RegionKind::Panel(_) => "panel",
            RegionKind::Notes => "notes",
            RegionKind::Plot => "plot",
        }
    }
}

/// A chart model that can be drawn region by region.
pub trait Chart {
    fn size(&self) -> (u32, u32);
    fn regions(&self) -> Vec<Region>;
    /// Draws `region` on `area` (of the region's size times `s.0`).
    fn draw<DB: DrawingBackend>(&self, region: &Region, area: &DrawingArea<DB, Shift>, s: Scale)
        -> Drawn<DB>;
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// The drawing scale (PNGs are drawn at twice their size): every pixel measure goes through it.
#[derive(Debug, Clone, Copy)]
pub struct Scale(pub u32);

impl Scale {
    fn px(self, v: u32) -> u32 {
        v * self.0
    }

    fn i(self, v: i32) -> i32 {
        v * self.0 as i32
    }

    fn font(self, size: f64) -> TextStyle<'static> {
        TextStyle::from(("sans-serif", size * self.0 as f64).into_font()).color(&TEXT)
    }
}

fn svg(chart: &impl Chart) -> anyhow::Result<String> {
    let (w, h) = chart.size();
    let mut out = format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"#FFFFFF\"/>\n"
    );
    for region in chart.regions() {
        let mut doc = String::new();
        {
            let area = SVGBackend::with_string(&mut doc, region.size).into_drawing_area();
            chart.draw(&region, &area, Scale(1)).map_err(|e| anyhow!("drawing the chart: {e}"))?;
            area.present().map_err(|e| anyhow!("drawing the chart: {e}"))?;
        }
        let body =
            doc.strip_prefix("<svg ").context("plotters wrote an SVG that does not start with <svg")?;
        let label =
            region.label.as_deref().map_or_else(String::new, |l| format!(" aria-label=\"{}\"", escape(l)));
        out += &format!(
            "<svg x=\"{}\" y=\"{}\" class=\"{}\"{label} {body}",
            region.origin.0,
            region.origin.1,
            region.kind.class()
        );
    }
    out += "</svg>\n";
    Ok(out)
}

/// Text in an XML attribute.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Pixels drawn per output pixel along each side.
const SUPERSAMPLE: u32 = 2;

fn png(chart: &impl Chart) -> anyhow::Result<Vec<u8>> {
    let (w, h) = chart.size();
    let (bw, bh) = (w * SUPERSAMPLE, h * SUPERSAMPLE);
    let mut big = vec![255u8; bw as usize * bh as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut big, (bw, bh)).into_drawing_area();
        let s = Scale(SUPERSAMPLE);
        for region in chart.regions() {
            let area = root.clone().shrink(
                (s.i(region.origin.0), s.i(region.origin.1)),
                (s.px(region.size.0), s.px(region.size.1)),
            );
            chart.draw(&region, &area, s).map_err(|e| anyhow!("drawing the chart: {e}"))?;
        }
        root.present().map_err(|e| anyhow!("drawing the chart: {e}"))?;
    }
    let small = downsample(&big, bw as usize, bh as usize, SUPERSAMPLE as usize);
    let mut out = Vec::new();
    let mut encoder = ::png::Encoder::new(&mut out, w, h);
    encoder.set_color(::png::ColorType::Rgb);
    encoder.set_depth(::png::BitDepth::Eight);
    let mut writer = encoder.write_header().context("encoding the PNG")?;
    writer.write_image_data(&small).context("encoding the PNG")?;
    writer.finish().context("encoding the PNG")?;
    Ok(out)
}

/// Averages `f × f` blocks of an RGB image `w × h`.
fn downsample(rgb: &[u8], w: usize, h: usize, f: usize) -> Vec<u8> {
    let (sw, sh) = (w / f, h / f);
    let mut out = vec![0u8; sw * sh * 3];
    for y in 0..sh {
        for x in 0..sw {
            for c in 0..3 {
                let mut sum = 0u32;
                for dy in 0..f {
                    for dx in 0..f {
                        sum += rgb[((y * f + dy) * w + x * f + dx) * 3 + c] as u32;
                    }
                }
                out[(y * sw + x) * 3 + c] = ((sum + (f * f / 2) as u32) / (f * f) as u32) as u8;
            }
        }
    }
    out
}

impl Chart for Figure {
    fn size(&self) -> (u32, u32) {
        self.layout.size
    }

    fn regions(&self) -> Vec<Region> {
        let l = &self.layout;
        let mut out =
            vec![Region { origin: (0, 0), size: (l.size.0, HEADER), kind: RegionKind::Header, label: None }];
        out.extend(self.panels.iter().enumerate().map(|(i, p)| Region {
            origin: l.panel_origin(i),
            size: l.panel,
            kind: RegionKind::Panel(i),
            label: Some(p.title.clone()),
        }));
        if !self.notes.is_empty() {
            let size = (l.size.0 - SIDE, l.footer);
            out.push(Region { origin: l.footer_origin(), size, kind: RegionKind::Notes, label: None });
        }
        out
    }

    fn draw<DB: DrawingBackend>(
        &self,
        region: &Region,
        area: &DrawingArea<DB, Shift>,
        s: Scale,
    ) -> Drawn<DB> {
        match region.kind {
            RegionKind::Header => {
                let legend: Vec<(Swatch, String)> =
                    self.legend.iter().enumerate().map(|(i, l)| legend_entry(l, i)).collect();
                header(area, &self.title, &self.subtitle, &legend, s)
            }
            RegionKind::Panel(i) => panel(area, &self.panels[i], s),
            RegionKind::Notes | RegionKind::Plot => notes(area, &self.notes, s),
        }
    }
}

/// What a legend entry shows before its text.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    Line(RGBColor),
    /// A filled box of this color and opacity.
    Fill(RGBColor, f64),
}

fn legend_entry(l: &Legend, i: usize) -> (Swatch, String) {
    match l {
        Legend::History => (Swatch::Line(HISTORY), "history".to_string()),
        Legend::Point(name) => (Swatch::Line(FORECAST), format!("{name} forecast")),
        Legend::Band { lower, upper } => {
            // Bands are drawn widest first, each over the wider ones: band j (legend entry i = j + 2, after the
            // history and the point forecast) stands alone where j + 1 layers overlap.
            let layers = i.saturating_sub(1) as i32;
            let opacity = 1.0 - (1.0 - BAND_OPACITY).powi(layers);
            let coverage = ((upper - lower) * 100.0).round();
            (Swatch::Fill(FORECAST, opacity), format!("{coverage}% interval (q{lower}–q{upper})"))
        }
    }
}

fn header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
    legend: &[(Swatch, String)],
    s: Scale,
) -> Drawn<DB> {
    let left = s.i(SIDE as i32);
    area.draw(&Text::new(title.to_string(), (left, s.i(10)), s.font(20.0)))?;
    area.draw(&Text::new(subtitle.to_string(), (left, s.i(36)), s.font(13.0).color(&MUTED)))?;
    let mut x = left;
    let y = s.i(56);
    let style = s.font(13.0);
    for (swatch, text) in legend {
        match *swatch {
            Swatch::Line(c) => {
                let mid = y + s.i(8);
                area.draw(&PathElement::new(vec![(x, mid), (x + s.i(22), mid)], c.stroke_width(s.px(2))))?;
            }
            Swatch::Fill(c, opacity) => {
                area.draw(&Rectangle::new(
                    [(x, y + s.i(2)), (x + s.i(22), y + s.i(14))],
                    c.mix(opacity).filled(),
                ))?;
            }
        }
        x += s.i(28);
        area.draw(&Text::new(text.clone(), (x, y + s.i(1)), style.clone()))?;
        let (w, _) = area.estimate_text_size(text, &style)?;
        x += w as i32 + s.i(22);
    }
    Ok(())
}

fn notes<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, notes: &[String], s: Scale) -> Drawn<DB> {
    for (i, note) in notes.iter().enumerate() {
        let y = s.i((i as u32 * layout::NOTE_LINE) as i32);
        area.draw(&Text::new(format!("note: {note}"), (0, y), s.font(12.0).color(&MUTED)))?;
    }
    Ok(())
}

fn panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel, s: Scale) -> Drawn<DB> {
    let x_labels = if p.x.desc.is_some() { layout::X_LABELS } else { layout::X_LABELS - 14 };
    let mut chart = ChartBuilder::on(area)
        .margin(s.px(layout::PANEL_MARGIN))
        .margin_top(s.px(2))
        .caption(&p.title, s.font(14.0))
        .x_label_area_size(s.px(x_labels))
        .y_label_area_size(s.px(layout::Y_LABELS))
        .build_cartesian_2d(Keyed::linear(&p.x), Keyed::linear(&p.y))?;
    let x_label = |x: &f64| p.x.label(*x);
    let y_label = |y: &f64| p.y.label(*y);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .bold_line_style(GRID.stroke_width(s.px(1)))
        .light_line_style(TRANSPARENT)
        .axis_style(ORIGIN.stroke_width(s.px(1)))
        .label_style(s.font(11.0).color(&MUTED))
        .axis_desc_style(s.font(11.0).color(&MUTED))
        .set_all_tick_mark_size(s.px(3));
    if let Some(desc) = &p.x.desc {
        mesh.x_desc(desc.as_str());
    }
    mesh.draw()?;
    // The forecast origin (the last point of the history).
    let origin = vec![(0.0, p.y.range.0), (0.0, p.y.range.1)];
    chart.draw_series(std::iter::once(PathElement::new(origin, ORIGIN.stroke_width(s.px(1)))))?;
    chart.draw_series(
        p.bands.iter().map(|b| Polygon::new(b.outline(), FORECAST.mix(BAND_OPACITY).filled())),
    )?;
    line(&mut chart, &p.forecast, FORECAST, s)?;
    for run in &p.history {
        line(&mut chart, run, HISTORY, s)?;
    }
    Ok(())
}

type Cartesian<'a, DB> = ChartContext<'a, DB, Cartesian2d<Keyed, Keyed>>;

/// A plotters axis whose grid lines and labels are exactly the model's ticks (plotters' own key points would
/// pick other ones), linear or logarithmic.
#[derive(Debug, Clone)]
pub struct Keyed {
    range: (f64, f64),
    keys: Vec<f64>,
    log: bool,
}

impl Keyed {
    fn linear(axis: &Axis) -> Keyed {
        Keyed { range: axis.range, keys: axis.ticks.iter().map(|t| t.at).collect(), log: false }
    }

    /// `axis.range` must be positive.
    fn log(axis: &Axis) -> Keyed {
        Keyed { log: true, ..Keyed::linear(axis) }
    }
}

impl Ranged for Keyed {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = |x: f64| if self.log { x.max(f64::MIN_POSITIVE).ln() } else { x };
        let (lo, hi) = (f(self.range.0), f(self.range.1));
        if hi == lo {
            return (limit.0 + limit.1) / 2;
        }
        let share = ((f(*v) - lo) / (hi - lo)).clamp(-1.0, 2.0);
        limit.0 + ((limit.1 - limit.0) as f64 * share + 1e-3).floor() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Only bold grid lines: light ones would be drawn between the ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.0..self.range.1
    }
}

/// A line through `points`; a single point is a dot.
fn line<DB: DrawingBackend>(
    chart: &mut Cartesian<'_, DB>,
    points: &[(f64, f64)],
    color: RGBColor,
    s: Scale,
) -> Drawn<DB> {
    match points {
        [] => {}
        [p] => {
            chart.draw_series(std::iter::once(Circle::new(*p, s.px(2), color.filled())))?;
        }
        _ => {
            chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(s.px(2))))?;
        }
    }
    Ok(())
}

impl Chart for BarChart {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn regions(&self) -> Vec<Region> {
        let (w, h) = self.size;
        vec![
            Region { origin: (0, 0), size: (w, HEADER), kind: RegionKind::Header, label: None },
            Region {
                origin: (SIDE as i32, HEADER as i32),
                size: (w - 2 * SIDE, h - HEADER),
                kind: RegionKind::Plot,
                label: None,
            },
        ]
    }

    fn draw<DB: DrawingBackend>(
        &self,
        region: &Region,
        area: &DrawingArea<DB, Shift>,
        s: Scale,
    ) -> Drawn<DB> {
        if region.kind == RegionKind::Header {
            let legend: Vec<(Swatch, String)> = self
                .series
                .iter()
                .enumerate()
                .map(|(i, name)| (Swatch::Fill(self.color(i), 1.0), name.clone()))
                .collect();
            return header(area, &self.title, &self.subtitle, &legend, s);
        }
        let mut chart = ChartBuilder::on(area)
            .margin(s.px(layout::PANEL_MARGIN))
            .x_label_area_size(s.px(30))
            .y_label_area_size(s.px(70))
            .build_cartesian_2d(
                Keyed::linear(&self.x),
                if self.log { Keyed::log(&self.y) } else { Keyed::linear(&self.y) },
            )?;
        let x_label = |x: &f64| self.x.label(*x);
        let y_label = |y: &f64| self.y.label(*y);
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .bold_line_style(GRID.stroke_width(s.px(1)))
            .light_line_style(TRANSPARENT)
            .axis_style(ORIGIN.stroke_width(s.px(1)))
            .label_style(s.font(12.0).color(&MUTED))
            .axis_desc_style(s.font(12.0).color(&MUTED))
            .set_all_tick_mark_size(s.px(3));
        if let Some(desc) = &self.y.desc {
            mesh.y_desc(desc.as_str());
        }
        mesh.draw()?;
        let bottom = self.y.range.0;
        chart.draw_series(
            self.bars
                .iter()
                .map(|b| Rectangle::new([(b.x.0, bottom), (b.x.1, b.value)], self.color(b.series).filled())),
        )?;
        let label = s.font(10.0).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(
            self.bars
                .iter()
                .map(|b| Text::new(b.label.clone(), ((b.x.0 + b.x.1) / 2.0, b.value), label.clone())),
        )?;
        let muted = label.color(&MUTED);
        chart.draw_series(
            self.missing
                .iter()
                .map(|b| Text::new(b.label.clone(), ((b.x.0 + b.x.1) / 2.0, b.value), muted.clone())),
        )?;
        Ok(())
    }
}

impl BarChart {
    /// Engines take the palette in order; the reference (last, when present) is gray.
    fn color(&self, series: usize) -> RGBColor {
        if self.reference && series + 1 == self.series.len() {
            REFERENCE
        } else {
            SERIES[series % SERIES.len()]
        }
    }
}

#[cfg(test)]
mod tests {
    use engines::request::{ForecastResponse, Limits, Overrides, QuantileForecast};

    use super::*;
    use crate::plot::model::{forecast_figure, About, ChartOptions, Forecast};
    use tables::{parse, Dataset, Format, ReadOptions};

    fn dataset(csv: &str) -> Dataset {
        let o = Overrides { horizon: Some(4), ..Overrides::default() };
        parse(csv.as_bytes().to_vec(), Format::Csv, "in.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    /// A Toto 2.0-style response: the median and the 0.1 / 0.9 quantiles.
    fn median(point: Vec<f32>) -> ForecastResponse {
        let q = |d: f32| vec![point.iter().map(|x| x + d).collect()];
        ForecastResponse {
            id: None,
            mean: None,
            median: Some(vec![point.clone()]),
            quantiles: vec![
                QuantileForecast { q: 0.1, values: q(-1.0) },
                QuantileForecast { q: 0.9, values: q(1.0) },
            ],
            samples: None,
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "e".into(),
            sampler: None,
            engine_sha256: None,
        }
    }

    fn figure(d: &Dataset, rs: &[ForecastResponse], opts: &ChartOptions) -> Figure {
        let fs: Vec<Forecast<'_>> =
            d.series.iter().zip(rs).map(|(series, response)| Forecast { series, response }).collect();
        forecast_figure(&fs, &About::default(), Vec::new(), opts).unwrap()
    }

    const CSV: &str = "unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,2\na,2024-01-04,4\na,2024-01-05,5\n\
                       b,2024-01-01,1\nb,2024-01-02,2\nb,2024-01-03,3\n";

    #[test]
    fn svg_nests_one_element_per_panel_with_its_lines_and_bands() {
        let d = dataset(CSV);
        let f =
            figure(&d, &[median(vec![6.0, 7.0, 8.0, 9.0]), median(vec![4.0; 4])], &ChartOptions::default());
        let svg = String::from_utf8(render(&f, ImageFormat::Svg).unwrap()).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let regions: Vec<_> = doc.root_element().children().filter(|n| n.has_tag_name("svg")).collect();
        assert_eq!(
            regions.iter().map(|r| r.attribute("class").unwrap()).collect::<Vec<_>>(),
            ["header", "panel", "panel"]
        );
        let stroke = |r: &roxmltree::Node<'_, '_>, color: RGBColor| -> Vec<usize> {
            let hex = format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2);
            r.descendants()
                .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(hex.as_str()))
                .map(|n| n.attribute("points").unwrap().split_whitespace().count())
                .collect()
        };
        // a: 1, 2, (gap), 4, 5 — two runs; b: one run of 3
        assert_eq!(stroke(&regions[1], HISTORY), [2, 2]);
        assert_eq!(stroke(&regions[2], HISTORY), [3]);
        for panel in &regions[1..] {
            assert_eq!(stroke(panel, FORECAST), [4]);
            let bands: Vec<_> = panel.descendants().filter(|n| n.has_tag_name("polygon")).collect();
            assert_eq!(bands.len(), 1);
            // the band's outline: the upper quantile forward, the lower one back
            assert_eq!(bands[0].attribute("points").unwrap().split_whitespace().count(), 8);
        }
        assert_eq!(regions[1].attribute("aria-label"), Some("a"));
        let header: Vec<&str> = regions[0]
            .descendants()
            .filter_map(|n| n.text())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        assert!(
            header.contains(&"median forecast") && header.contains(&"80% interval (q0.1–q0.9)"),
            "{header:?}"
        );
    }

    #[test]
    fn png_is_an_image_of_the_requested_size() {
        let d = dataset(CSV);
        let opts = ChartOptions { size: Some((640, 400)), ..ChartOptions::default() };
        let f = figure(&d, &[median(vec![6.0; 4]), median(vec![4.0; 4])], &opts);
        let bytes = render(&f, ImageFormat::Png).unwrap();
        let reader = ::png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let info = reader.info();
        assert_eq!((info.width, info.height, info.color_type), (640, 400, ::png::ColorType::Rgb));
    }

    #[test]
    fn keyed_axes_map_linearly_or_logarithmically_and_keep_only_their_ticks() {
        let axis = |range, ticks: &[f64]| Axis {
            range,
            ticks: ticks.iter().map(|&at| crate::plot::ticks::Tick { at, label: String::new() }).collect(),
            desc: None,
        };
        let lin = Keyed::linear(&axis((0.0, 10.0), &[0.0, 5.0]));
        assert_eq!(
            (lin.map(&0.0, (0, 100)), lin.map(&5.0, (0, 100)), lin.map(&10.0, (0, 100))),
            (0, 50, 100)
        );
        let log = Keyed::log(&axis((1.0, 1000.0), &[10.0]));
        assert_eq!((log.map(&10.0, (0, 300)), log.map(&100.0, (0, 300))), (100, 200));
        // bold points (grid lines and labels) are the ticks; light ones (plotters' minor grid) none
        assert_eq!(log.key_points(plotters::coord::ranged1d::BoldPoints(5)), [10.0]);
        assert_eq!(log.key_points(plotters::coord::ranged1d::LightPoints::new(5, 10)), Vec::<f64>::new());
    }

    #[test]
    fn downsampling_averages_blocks() {
        let rgb = [0, 0, 0, 255, 255, 255, 10, 20, 30, 10, 20, 30];
        assert_eq!(downsample(&rgb, 2, 2, 2), [69, 74, 79]);
    }
}
