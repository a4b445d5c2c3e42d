//! SVG line charts with plotters: one chart, or several stacked on one
//! time axis (goodput above, the shed engine's limit below).

use std::path::Path;

use plotters::{coord::Shift, prelude::*};

/// One named line.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// One chart of a stack.
pub struct Panel {
    /// Caption above the chart.
    pub title: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
];

/// Draws `series` as lines into an SVG file at `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: Vec<Series>,
) -> Result<(), Box<dyn std::error::Error>> {
    panels(
        path,
        x_label,
        vec![Panel {
            title: title.into(),
            y_label: y_label.into(),
            series,
        }],
    )
}

/// Draws `panels` stacked vertically, sharing the x range, into an SVG file.
pub fn panels(
    path: &Path,
    x_label: &str,
    panels: Vec<Panel>,
) -> Result<(), Box<dyn std::error::Error>> {
    let x_max = panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| &s.points)
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .fold(0.0f64, |m, (x, _)| m.max(*x));
    let height = 500 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (area, panel) in areas.iter().zip(&panels) {
        draw(area, panel, x_label, x_max)?;
    }
    root.present()?;
    Ok(())
}

fn draw(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
    x_label: &str,
    x_max: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let finite = |(x, y): &&(f64, f64)| x.is_finite() && y.is_finite();
    let y_max = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(finite)
        .fold(0.0f64, |m, (_, y)| m.max(*y));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..(x_max * 1.02).max(1.0), 0.0..(y_max * 1.3).max(1.0))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(&panel.y_label)
        .draw()?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().filter(finite).copied(),
                color.stroke_width(2),
            ))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}
