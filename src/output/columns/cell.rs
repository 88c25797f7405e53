//! One cell's value before it is written: empty, a number, a text or a flag, and its CSV text.

/// One cell's value before it is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Unknown, or not a figure of this pattern: an empty CSV field, "-" in a table.
    Empty,
    Int(u64),
    Float(f64),
    Text(String),
    Bool(bool),
}

impl Cell {
    /// The CSV field: Rust's shortest text that reads back as the same number.
    pub fn csv(&self) -> String {
        match self {
            Cell::Empty => String::new(),
            Cell::Int(v) => v.to_string(),
            Cell::Float(v) => v.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Bool(b) => b.to_string(),
        }
    }

    pub(super) fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Empty, Into::into)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Int(v)
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(u64::from(v))
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Float(v)
    }
}

impl From<bool> for Cell {
    fn from(v: bool) -> Cell {
        Cell::Bool(v)
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Text(v)
    }
}

pub(super) fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}
