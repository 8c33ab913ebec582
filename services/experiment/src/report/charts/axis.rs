//! What the charts' axes share: the labels of a category axis. Its own file because the summary
//! charts and the crossover chart both use it, and neither should import the other for it.

/// An x tick's label on a category axis (categories at 0, 1, 2, ...).
pub(crate) fn category(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 0.01 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}
