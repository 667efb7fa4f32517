//! `bench sweep --plot FILE.png`: the sweep's table as a chart (plotters): one line per
//! system, the heap in percent of the limit on the x axis, each cell's accesses/s in percent
//! of the best cell on a logarithmic y axis (a cell above the limit may be hundreds of times
//! below the best). The font is built in (DejaVu Sans, assets/), so the chart draws the same
//! on a machine without fonts.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Why the chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The chart library failed (the file cannot be written, most often).
    #[error("cannot draw the chart into {path}: {why}")]
    Draw {
        /// The file.
        path: String,
        /// What the library said.
        why: String,
    },
    /// Nothing to draw.
    #[error("nothing to draw: no figure")]
    Empty,
}

/// One line of the chart: a system and its cells, in percent of the best cell (None: the
/// cell has no figure).
pub struct Line {
    /// The system's name.
    pub name: String,
    /// (heap percent of the limit, percent of the best cell).
    pub points: Vec<(f64, Option<f64>)>,
}

/// What the axes say: the sweep's (heap in percent of the limit, accesses/s in percent of
/// the best cell) by default.
pub struct Axes<'a> {
    /// The x axis.
    pub x: &'a str,
    /// The y axis (a logarithmic percentage).
    pub y: &'a str,
}

impl Default for Axes<'_> {
    fn default() -> Self {
        Axes {
            x: "heap, % of the memory limit",
            y: "accesses/s, % of the best cell (log)",
        }
    }
}

/// Draw `lines` into the PNG file `path`, titled `title`.
pub fn sweep_chart(path: &Path, title: &str, lines: &[Line]) -> Result<(), PlotError> {
    chart(path, title, &Axes::default(), lines)
}

/// Draw `lines` into the PNG file `path`, titled `title`, the axes saying `axes`.
pub fn chart(path: &Path, title: &str, axes: &Axes, lines: &[Line]) -> Result<(), PlotError> {
    let err = |why: String| PlotError::Draw {
        path: path.display().to_string(),
        why,
    };
    let values: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().filter_map(|p| p.1))
        .filter(|v| *v > 0.0)
        .collect();
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    if values.is_empty() || xs.is_empty() {
        return Err(PlotError::Empty);
    }
    // A font registered twice is an error of no consequence: the first stays.
    let _ = register_font("sans-serif", FontStyle::Normal, FONT);
    let y_min = values
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min)
        .min(10.0)
        / 1.5;
    let (x_min, x_max) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });

    let root = BitMapBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_min - 2.0..x_max + 2.0, (y_min..150.0).log_scale())
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| format!("{y}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, line) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|&(x, y)| y.filter(|v| *v > 0.0).map(|v| (x, v)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(line.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_a_png_and_an_empty_sweep_is_refused() {
        let dir = std::env::temp_dir().join(format!("uzswap-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sweep.png");
        let lines = vec![
            Line {
                name: "uzswap".into(),
                points: vec![(75.0, Some(100.0)), (100.0, Some(40.0)), (125.0, Some(3.0))],
            },
            Line {
                name: "kernel-zswap".into(),
                points: vec![(75.0, Some(90.0)), (100.0, None), (125.0, Some(0.5))],
            },
        ];
        sweep_chart(&path, "sweep", &lines).unwrap();
        let png = std::fs::read(&path).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(png.len() > 10_000, "{} bytes: nothing drawn?", png.len());
        let none = vec![Line {
            name: "x".into(),
            points: vec![(75.0, None)],
        }];
        assert!(matches!(
            sweep_chart(&path, "sweep", &none),
            Err(PlotError::Empty)
        ));
        let bad = dir.join("no-such-dir").join("x.png");
        assert!(sweep_chart(&bad, "sweep", &lines).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
