//! What every chart shares: its width, its font and its palette.
//!
//! Text needs a TrueType font: plotters' `ab_glyph` renderer takes the bytes of one, found at run
//! time (`--font`, `EXPERIMENT_FONT`, or the usual Debian paths), so nothing links fontconfig.
//! Without a font the charts are skipped and the report says so.

use plotters::prelude::*;
use std::error::Error;
use std::path::{Path, PathBuf};

pub(crate) type Draw<T> = Result<T, Box<dyn Error>>;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChartError {
    #[error("no TrueType font found (tried {0}): install fonts-dejavu-core or pass --font FILE")]
    NoFont(String),
    #[error("font {0} is not a TrueType/OpenType font")]
    BadFont(String),
    #[error("chart {0}: {1}")]
    Draw(String, String),
}

pub(crate) const WIDTH: u32 = 1200;
pub(crate) const FONT: &str = "sans-serif";

/// Colours that stay apart when printed and for most colour-blind readers (Tableau 10).
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Registers the font once per process; returns the file used.
pub(crate) fn register_font(given: Option<&Path>) -> Result<PathBuf, ChartError> {
    static DONE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(p) = DONE.get() {
        return Ok(p.clone());
    }
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => FONT_PATHS.iter().map(PathBuf::from).collect(),
    };
    let path = candidates.iter().find(|p| p.exists()).ok_or_else(|| {
        ChartError::NoFont(candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))
    })?;
    let bytes = std::fs::read(path).map_err(|_| ChartError::BadFont(path.display().to_string()))?;
    // plotters keeps fonts for the life of the process; one leaked font file per run is that.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    for style in [FontStyle::Normal, FontStyle::Bold] {
        plotters::style::register_font(FONT, style, bytes)
            .map_err(|_| ChartError::BadFont(path.display().to_string()))?;
    }
    Ok(DONE.get_or_init(|| path.clone()).clone())
}

pub(crate) fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}
