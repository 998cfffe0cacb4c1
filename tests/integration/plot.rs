//! Charts end to end on the tiny engine and the statsmodels series of `tests/fixtures/data/`: `forecast --plot`
//! draws one panel per series with the history window (gaps where the weekly co2 series misses weeks), the point
//! forecast and one band per symmetric quantile pair; the x axis is labelled with the input's timestamps; PNGs
//! have the requested size and carry drawn text (embedded font); `totoc plot` redraws the same panels from a
//! saved forecast (CSV, Parquet, JSON Lines) and from a Toto 2.0-style median forecast; `bench --plot` draws one
//! bar per timed workload. SVGs are parsed (roxmltree), PNGs decoded (png).
use std::fs;
use std::path::{Path, PathBuf};

use jiff::civil::Date;

use crate::common::*;
use crate::forecast::engine;

/// Colors of the renderer (`src/plot/render.rs`): history, point forecast (and its bands), first bench engine.
const HISTORY: &str = "#1F4E79";
const FORECAST: &str = "#D9480F";

fn data(name: &str) -> PathBuf {
    root().join("tests/fixtures/data").join(name)
}

fn forecast(input: &Path, extra: &[&str]) -> String {
    let mut args =
        vec!["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = totoc(&args);
    assert!(out.status.success(), "totoc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stderr).unwrap()
}

/// What one `class="panel"` element of a chart holds.
#[derive(Debug, PartialEq)]
struct Panel {
    title: String,
    /// Points of each history polyline (circles are one-point runs).
    history: Vec<usize>,
    /// Points of each forecast polyline.
    forecast: Vec<usize>,
    /// Filled polygons in the forecast color (bands).
    bands: usize,
    texts: Vec<String>,
    /// The panel's SVG, as written.
    source: String,
}

/// The chart's panels, and every text of its header and notes.
fn parse_svg(svg: &str) -> (Vec<Panel>, Vec<String>) {
    let doc = roxmltree::Document::parse(svg).expect("the chart is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let texts = |n: roxmltree::Node<'_, '_>| -> Vec<String> {
        n.descendants()
            .filter(|d| d.has_tag_name("text"))
            .map(|t| t.text().unwrap_or("").trim().to_string())
            .collect()
    };
    let mut panels = Vec::new();
    let mut other = Vec::new();
    for region in root.children().filter(|n| n.has_tag_name("svg")) {
        if region.attribute("class") != Some("panel") {
            other.extend(texts(region));
            continue;
        }
        let polylines = |color: &str| -> Vec<usize> {
            region
                .descendants()
                .filter(|d| d.has_tag_name("polyline") && d.attribute("stroke") == Some(color))
                .map(|d| d.attribute("points").unwrap().split_whitespace().count())
                .collect()
        };
        let mut history = polylines(HISTORY);
        history.extend(
            region
                .descendants()
                .filter(|d| d.has_tag_name("circle") && d.attribute("fill") == Some(HISTORY))
                .map(|_| 1),
        );
        panels.push(Panel {
            title: region.attribute("aria-label").unwrap_or("").to_string(),
            history,
            forecast: polylines(FORECAST),
            bands: region
                .descendants()
                .filter(|d| d.has_tag_name("polygon") && d.attribute("fill") == Some(FORECAST))
                .count(),
            texts: texts(region),
            source: svg[region.range()].to_string(),
        });
    }
    (panels, other)
}

/// The weekly co2 fixture: (date, observed) for its rows; missing weeks are left out of the file.
fn co2_dates() -> Vec<Date> {
    fs::read_to_string(data("co2_wide.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

/// Runs of consecutive weeks among the observed weeks of the last `window` weeks of co2, and their lengths.
fn co2_runs(window: i64) -> Vec<usize> {
    let dates = co2_dates();
    let last = *dates.last().unwrap();
    let weeks: Vec<i64> =
        dates.iter().map(|d| (last - *d).get_days() as i64 / 7).filter(|&w| w < window).collect();
    let mut runs: Vec<usize> = Vec::new();
    let mut prev: Option<i64> = None;
    for w in weeks {
        match prev {
            Some(p) if p == w + 1 => *runs.last_mut().unwrap() += 1,
            _ => runs.push(1),
        }
        prev = Some(w);
    }
    runs
}

#[test]
fn forecast_plot_draws_one_panel_per_series_with_gaps_bands_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("long.svg");
    let args = ["--horizon", "8", "--samples", "64", "--quantiles", "0.1,0.25,0.5,0.75,0.9", "--output", "-"];
    let mut with_plot = args.to_vec();
    with_plot.extend(["--plot", svg.to_str().unwrap()]);
    forecast(&data("long.csv"), &with_plot);
    let (panels, header) = parse_svg(&fs::read_to_string(&svg).unwrap());
    // sunspots and elnino are longer than the tiny engine's context of 256 points: the title says so
    assert_eq!(
        panels.iter().map(|p| p.title.as_str()).collect::<Vec<_>>(),
        ["sunspots (context: last 256 of 309 points)", "elnino (context: last 256 of 732 points)", "co2"]
    );
    for p in &panels {
        assert_eq!(p.forecast, [8], "{}: one forecast line of 8 steps", p.title);
        // 0.1–0.9 and 0.25–0.75; 0.5 is no pair
        assert_eq!(p.bands, 2, "{}", p.title);
    }
    // The default window is four horizons, at least 64 points; sunspots and elnino have no gaps.
    assert_eq!(panels[0].history, [64]);
    assert_eq!(panels[1].history, [64]);
    // co2 misses weeks: one line per run of observed weeks, together the observed points of the window
    let co2 = &panels[2];
    let runs = co2_runs(64);
    assert!(runs.len() > 1, "the fixture has gaps in its last 64 weeks: {runs:?}");
    let mut got = co2.history.clone();
    got.sort_unstable();
    let mut want = runs.clone();
    want.sort_unstable();
    assert_eq!(got, want);
    assert!(co2.history.iter().sum::<usize>() < 64);
    // x labels are the series' own timestamps: Saturdays of its weekly grid, some of them rows of the input
    let dates = co2_dates();
    let last = *dates.last().unwrap();
    let labels: Vec<Date> = co2.texts.iter().filter_map(|t| t.parse::<Date>().ok()).collect();
    assert!(labels.len() >= 3, "{:?}", co2.texts);
    for d in &labels {
        assert_eq!((last - *d).get_days() % 7, 0, "{d} is not on co2's weekly grid");
    }
    assert!(labels.iter().any(|d| dates.contains(d)), "no label is a timestamp of the input: {labels:?}");
    assert!(labels.iter().all(|d| (*d - last).get_days() <= 8 * 7), "labels beyond the forecast: {labels:?}");
    // the header names the model and engine, and the legend the point forecast and both bands
    let header = header.join("\n");
    assert!(header.contains("model toto-1.0 · engine engine: cpu (onnxruntime"), "{header}");
    for entry in ["history", "mean forecast", "80% interval (q0.1–q0.9)", "50% interval (q0.25–q0.75)"] {
        assert!(header.contains(entry), "{entry}: {header}");
    }

    // without quantiles there are no bands
    let plain = dir.path().join("plain.svg");
    forecast(&data("long.csv"), &["--horizon", "8", "--output", "-", "--plot", plain.to_str().unwrap()]);
    let (panels, header) = parse_svg(&fs::read_to_string(&plain).unwrap());
    assert!(panels.iter().all(|p| p.bands == 0 && p.forecast == [8]));
    assert!(!header.join(" ").contains("interval"));
}

#[test]
fn png_has_the_requested_size_and_drawn_text() {
    let dir = tempfile::tempdir().unwrap();
    let png_path = dir.path().join("co2.png");
    forecast(
        &data("co2_wide.csv"),
        &[
            "--horizon",
            "16",
            "--samples",
            "32",
            "--output",
            "-",
            "--plot",
            png_path.to_str().unwrap(),
            "--plot-size",
            "900x500",
        ],
    );
    let bytes = fs::read(&png_path).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), (900, 500));
    assert_eq!((frame.color_type, frame.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
    let at = |x: u32, y: u32| {
        let i = ((y * frame.width + x) * 3) as usize;
        (pixels[i], pixels[i + 1], pixels[i + 2])
    };
    // The title (top-left, embedded font) is drawn: dark pixels where there is nothing but text.
    let dark = (0..30).flat_map(|y| (0..300).map(move |x| (x, y))).filter(|&(x, y)| at(x, y).0 < 100).count();
    assert!(dark > 100, "no title text was drawn ({dark} dark pixels)");
    // The history and the forecast are drawn in their colors.
    let near = |c: (u8, u8, u8), (r, g, b): (u8, u8, u8)| {
        (c.0 as i32 - r as i32).abs() + (c.1 as i32 - g as i32).abs() + (c.2 as i32 - b as i32).abs() < 30
    };
    let count = |color| {
        (0..500).flat_map(|y| (0..900).map(move |x| (x, y))).filter(|&(x, y)| near(at(x, y), color)).count()
    };
    assert!(count((31, 78, 121)) > 200, "no history line");
    assert!(count((217, 72, 15)) > 100, "no forecast line");
}

#[test]
fn totoc_plot_redraws_the_panels_from_every_saved_format() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["--horizon", "8", "--samples", "32", "--quantiles", "0.1,0.9"];
    for (ext, input) in [("csv", "long.csv"), ("parquet", "long.parquet"), ("jsonl", "long.jsonl")] {
        let saved = dir.path().join(format!("forecast.{ext}"));
        let direct = dir.path().join(format!("direct-{ext}.svg"));
        let mut args = base.to_vec();
        args.extend(["--output", saved.to_str().unwrap(), "--plot", direct.to_str().unwrap()]);
        forecast(&data(input), &args);
        let redrawn = dir.path().join(format!("redrawn-{ext}.svg"));
        let err = totoc_ok_stderr(&[
            "plot",
            "--input",
            data(input).to_str().unwrap(),
            "--forecast",
            saved.to_str().unwrap(),
            "--plot",
            redrawn.to_str().unwrap(),
        ]);
        assert!(err.contains("plotted 3 series"), "{err}");
        let (want, _) = parse_svg(&fs::read_to_string(&direct).unwrap());
        let (got, header) = parse_svg(&fs::read_to_string(&redrawn).unwrap());
        assert_eq!(got.len(), 3, "{ext}");
        for (g, w) in got.iter().zip(&want) {
            // The same numbers read back: the very same panel. Only JSON responses say how the context was cut
            // (tables do not), which the title shows.
            let uncut = |p: &Panel| {
                let cut = p.title.find(" (context:").map_or("", |i| &p.title[i..]);
                if ext == "jsonl" {
                    p.source.clone()
                } else {
                    p.source.replace(cut, "")
                }
            };
            assert_eq!(uncut(g), uncut(w), "{ext}: panel {}", w.title);
        }
        // the point forecast says the model; JSON responses also name the engine
        let header = header.join("\n");
        assert!(header.contains("model toto-1.0"), "{ext}: {header}");
        assert_eq!(header.contains("engine cpu (onnxruntime"), ext == "jsonl", "{ext}: {header}");
    }
}

/// Runs totoc, asserts success, returns stderr.
fn totoc_ok_stderr(args: &[&str]) -> String {
    let out = totoc(args);
    assert!(out.status.success(), "totoc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_median_forecast_is_drawn_as_toto_2_point_forecast() {
    // A Toto 2.0 engine writes `median`; a saved one is drawn without any engine.
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("median.jsonl");
    fs::write(
        &saved,
        r#"{"median": [[330.0, 331.0, 332.0]], "quantiles": [{"q": 0.1, "values": [[329.0, 329.5, 330.0]]}, {"q": 0.9, "values": [[331.0, 332.5, 334.0]]}], "samples": null, "profile": "p", "engine": "cuda (onnxruntime 1.31.1)", "timestamps": ["1967-01-21", "1967-01-28", "1967-02-04"]}"#,
    )
    .unwrap();
    let svg = dir.path().join("median.svg");
    let input = data("co2_wide.csv");
    let args = [
        "plot",
        "--input",
        input.to_str().unwrap(),
        "--forecast",
        saved.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ];
    totoc_ok_stderr(&args);
    let (panels, header) = parse_svg(&fs::read_to_string(&svg).unwrap());
    assert_eq!(panels.len(), 1);
    assert_eq!(
        (panels[0].title.as_str(), panels[0].forecast.as_slice(), panels[0].bands),
        ("co2", &[3][..], 1)
    );
    let header = header.join("\n");
    for text in [
        "Forecast of co2",
        "model toto-2.0 · engine cuda (onnxruntime 1.31.1)",
        "median forecast",
        "80% interval",
    ] {
        assert!(header.contains(text), "{text}: {header}");
    }
    // history window: --plot-history
    let mut args = args.to_vec();
    args.extend(["--plot-history", "10"]);
    totoc_ok_stderr(&args);
    let (panels, _) = parse_svg(&fs::read_to_string(&svg).unwrap());
    let shown: usize = panels[0].history.iter().sum();
    assert_eq!(shown, co2_runs(10).iter().sum::<usize>());
    // a forecast that does not continue the series: another input, or another --freq
    fs::write(&saved, fs::read_to_string(&saved).unwrap().replace("1967-01-21", "1967-01-22")).unwrap();
    let out = totoc(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("forecast step 1 is 1967-01-22, but the series in the input continues at 1967-01-21"),
        "{err}"
    );
}

/// Saved forecasts name their model (`model`, response format 5): `totoc plot` says that model, not the one its
/// point forecast would suggest (a `mean` is not only Toto 1.0's), and still names older files by their point.
#[test]
fn the_saved_model_names_the_chart_and_older_files_are_named_by_their_point_forecast() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"mean": [[330.0, 331.0, 332.0]], "quantiles": [], "samples": null, "profile": "p", "engine": "cpu (onnxruntime 1.31.1)", "model": "candles-0.1", "timestamps": ["1967-01-21", "1967-01-28", "1967-02-04"]}"#;
    let input = data("co2_wide.csv");
    for (name, text, want) in [
        ("named.jsonl", body.to_string(), "model candles-0.1 · engine cpu"),
        ("older.jsonl", body.replace(r#""model": "candles-0.1", "#, ""), "model toto-1.0 · engine cpu"),
    ] {
        let saved = dir.path().join(name);
        fs::write(&saved, text).unwrap();
        let svg = dir.path().join(format!("{name}.svg"));
        totoc_ok_stderr(&[
            "plot",
            "--input",
            input.to_str().unwrap(),
            "--forecast",
            saved.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ]);
        let (_, header) = parse_svg(&fs::read_to_string(&svg).unwrap());
        let header = header.join("\n");
        assert!(header.contains(want), "{name}: {header}");
    }
}

#[test]
fn the_panel_cap_leaves_a_note_and_bad_plot_flags_fail_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("two.svg");
    forecast(
        &data("long.csv"),
        &["--horizon", "4", "--output", "-", "--plot", svg.to_str().unwrap(), "--plot-panels", "2"],
    );
    let (panels, other) = parse_svg(&fs::read_to_string(&svg).unwrap());
    assert_eq!(panels.len(), 2);
    assert!(other.iter().any(|t| t == "note: 1 of 3 panels are not shown (one per series and variate); --plot-panels 3 shows them all"), "{other:?}");

    // refused before the engine loads (this one does not exist) and nothing is written
    let out_csv = dir.path().join("out.csv");
    for (flags, message) in [
        (
            vec!["--plot", "chart.jpg"],
            "--plot chart.jpg: charts are written as SVG or PNG; name the file *.svg or *.png",
        ),
        (vec!["--plot", "c.svg", "--plot-size", "300x100"], "--plot-size 300x100 leaves"),
        (vec!["--plot", "c.svg", "--plot-size", "big"], "--plot-size `big` is not a size"),
        (vec!["--plot", "c.svg", "--plot-history", "0"], "--plot-history 0 shows no history"),
    ] {
        let mut args = vec![
            "forecast",
            "--engine",
            "/nonexistent",
            "--input",
            "x.csv",
            "--horizon",
            "4",
            "--output",
            out_csv.to_str().unwrap(),
        ];
        args.extend(flags);
        let err = totoc_err(&args);
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert!(!out_csv.exists());
    // --plot-* needs --plot
    assert!(totoc_err(&["forecast", "--engine", "e", "--input", "x.csv", "--plot-history", "5"])
        .contains("--plot <PLOT>"));
}

#[test]
fn bench_plot_draws_a_bar_per_timed_workload() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("bench.svg");
    let engine_arg = format!("tiny={}", engine().display());
    let stdout = totoc_ok(&[
        "bench",
        "--engine",
        &engine_arg,
        "--runs",
        "1",
        "--context",
        "64",
        "--no-rss",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    // The table's `tiny ms` column: a number per timed workload, `-` where the tiny profiles cannot run it.
    let cells: Vec<&str> = stdout
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.contains("_h")))
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(cells.len(), 6, "{stdout}");
    // the machine is recorded beside the figures (it decides which kernels ran)
    let cpu = engines::backend::cpu_summary().expect("Linux /proc/cpuinfo");
    assert!(stdout.contains(&format!("  cpu          {cpu}")), "{stdout}");
    let timed = cells.iter().filter(|c| **c != "-").count();
    assert!((1..6).contains(&timed), "{stdout}");
    let text = fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let plot = doc
        .root_element()
        .children()
        .find(|n| n.attribute("class") == Some("plot"))
        .expect("the plot region");
    let bars =
        plot.descendants().filter(|d| d.has_tag_name("rect") && d.attribute("fill") == Some(HISTORY)).count();
    assert_eq!(bars, timed);
    let texts: Vec<&str> = plot
        .descendants()
        .filter(|d| d.has_tag_name("text"))
        .filter_map(|t| t.text())
        .map(str::trim)
        .collect();
    assert_eq!(texts.iter().filter(|t| **t == "n/a").count(), 6 - timed);
    for w in ["mean_h336", "samples256_h64", "mean_h64"] {
        assert!(texts.contains(&w), "{w}: {texts:?}");
    }
    assert!(totoc_err(&["bench", "--engine", &engine_arg, "--plot", "bench.gif"])
        .contains("charts are written as SVG or PNG"));
}
