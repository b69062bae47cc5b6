//! The report as a bar chart (SVG): each benchmark's throughput relative to `native-x86`, one
//! bar per platform, on a log scale — the shape of the paper's Figure 8.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Report;
use crate::platform::Platform;

/// The platforms drawn, with their colours (native-x86 is the line at 1).
const SERIES: [(Platform, RGBColor); 4] = [
    (Platform::Wasmtime, RGBColor(120, 120, 120)),
    (Platform::Cpu, RGBColor(31, 119, 180)),
    (Platform::OpenCl, RGBColor(255, 127, 14)),
    (Platform::Cuda, RGBColor(44, 160, 44)),
];

/// Writes the chart of `report` to `path` as SVG.
pub fn write_svg(report: &Report, path: &Path) -> Result<(), String> {
    let width = 200 + 110 * report.benchmarks.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    draw(report, &root).map_err(|e| format!("drawing {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn draw<DB: DrawingBackend>(
    report: &Report,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let benches = &report.benchmarks;
    let series: Vec<(Platform, RGBColor)> = SERIES
        .into_iter()
        .filter(|(p, _)| benches.iter().any(|b| b.ratio_to_native.get(*p).is_some()))
        .collect();
    let ratios = benches.iter().flat_map(|b| {
        series
            .iter()
            .filter_map(|(p, _)| b.ratio_to_native.get(*p).copied())
    });
    let (lo, hi) = ratios.fold((1.0f64, 1.0f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let (lo, hi) = (lo / 2.0, hi * 2.0);
    let n = benches.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Throughput relative to native-x86 (log scale; 1 = native)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("× native-x86")
        .y_label_formatter(&|v| format!("{v}"))
        .draw()?;
    let slot = 0.8 / series.len().max(1) as f64;
    for (k, (p, colour)) in series.iter().enumerate() {
        let bars = benches.iter().enumerate().filter_map(|(i, b)| {
            let r = *b.ratio_to_native.get(*p)?;
            let x0 = i as f64 + 0.1 + k as f64 * slot;
            Some(Rectangle::new(
                [(x0, lo), (x0 + slot * 0.9, r)],
                colour.filled(),
            ))
        });
        let colour = *colour;
        chart
            .draw_series(bars)?
            .label(p.key())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 1.0), (n, 1.0)],
        BLACK.stroke_width(2),
    )))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    let style =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, b) in benches.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, lo));
        let label = if b.validated {
            b.title.to_string()
        } else {
            format!("{} (✗)", b.title)
        };
        root.draw(&Text::new(label, (x, y + 8), style.clone()))?;
    }
    Ok(())
}
