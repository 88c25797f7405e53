//! A run as the figures name it in legends and titles.

use crate::model::RunDocument;

/// A run with the name it has in legends.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub id: i64,
    pub report: &'a RunDocument,
}

impl Run<'_> {
    /// How legends and titles name the run: "#12", or "#12 (nodelay)" with its `--label`.
    pub fn name(&self) -> String {
        match self
            .report
            .label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
        {
            Some(l) => format!("#{} ({})", self.id, crate::text::printable(l.trim())),
            None => format!("#{}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::plots::Figure;
    use crate::figures::series::throughput;
    use crate::store::db::tests::report;

    #[test]
    fn legends_and_titles_name_a_run_by_its_label() {
        let mut a = report("pingpong", 3, 20_000.0);
        a.label = Some("nodelay".into());
        let b = report("pingpong", 3, 30_000.0);
        let runs = [Run { id: 12, report: &a }, Run { id: 13, report: &b }];
        assert_eq!(runs[0].name(), "#12 (nodelay)");
        assert_eq!(runs[1].name(), "#13");
        let Some(Figure::Chart(c)) = throughput(&runs) else {
            panic!("no throughput chart")
        };
        let labels: Vec<&str> = c.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["#12 (nodelay) 2n/RTT", "#13 2n/RTT"]);
        // A label with a control character cannot reach a figure as one.
        a.label = Some("x\u{1b}[2J".into());
        let r = Run { id: 1, report: &a };
        assert_eq!(r.name(), "#1 (x\\u{1b}[2J)");
    }
}
