//! What the tools print: aligned text columns for people, one JSON document for scripts.

use crate::args::Format;
use serde_json::Value;

/// Prints `rows` under `headers` as aligned columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Prints `json` in JSON mode, else runs `text`.
pub fn emit(format: Format, json: Value, text: impl FnOnce()) {
    match format {
        Format::Json => println!("{json}"),
        Format::Text => text(),
    }
}

/// A list of node ids as Kafka's tools print them: `1,2,3`.
pub fn ids(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_comma_separated() {
        assert_eq!(super::ids(&[1, 2, 3]), "1,2,3");
        assert_eq!(super::ids(&[]), "");
    }
}
