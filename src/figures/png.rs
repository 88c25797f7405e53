//! PNG output for `plot`: the figure's SVG rasterised with resvg, so that a PNG shows exactly
//! what the SVG and the HTML report show. Text needs a font installed on the system.

use anyhow::{anyhow, bail, Context, Result};
use resvg::{tiny_skia, usvg};

/// Pixels per SVG unit: twice the figure's size, sharp enough to print.
const SCALE: f32 = 2.0;

/// Families tried, in order, for the figures' generic "sans-serif" text.
const SANS: &[&str] = &[
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "Helvetica",
];

pub fn svg_to_png(svg: &str) -> Result<Vec<u8>> {
    let mut opt = usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_system_fonts();
    let families: Vec<String> = fonts
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    // fontdb's default sans-serif is Arial, which Linux systems rarely have.
    let Some(sans) = SANS
        .iter()
        .map(|s| s.to_string())
        .find(|s| families.contains(s))
        .or_else(|| families.first().cloned())
    else {
        bail!("PNG output needs a font installed on the system (e.g. Debian's fonts-dejavu-core); write .svg instead");
    };
    fonts.set_sans_serif_family(sans);
    let tree = usvg::Tree::from_str(svg, &opt).context("reading the figure's SVG")?;
    let size = tree.size();
    let (w, h) = (
        (size.width() * SCALE).ceil() as u32,
        (size.height() * SCALE).ceil() as u32,
    );
    let mut pixmap =
        tiny_skia::Pixmap::new(w, h).ok_or_else(|| anyhow!("cannot make a {w}x{h} image"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().context("encoding the PNG")
}
