//! The one printer of the `list` commands (gateways, auditors, credentials, preauthorizations):
//! `--json` prints the rows as a JSON array; otherwise a header line and one line per row, each
//! column as wide as its widest cell, two spaces apart. With no row, a note goes to stderr and
//! stdout stays empty, so a script reading the table sees nothing rather than a lone header.

use crate::exit::EXIT_ALLOW;
use serde::Serialize;
use std::io::Write;

/// A column: its title, and whether its cells line up on the right (counts).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Column {
    title: &'static str,
    right: bool,
}

impl Column {
    /// A column aligned on the left.
    pub(crate) const fn left(title: &'static str) -> Self {
        Self {
            title,
            right: false,
        }
    }

    /// A column aligned on the right.
    pub(crate) const fn right(title: &'static str) -> Self {
        Self { title, right: true }
    }
}

/// Print `rows` under `columns` (`cells` gives one row's cells, in the columns' order), or as a
/// JSON array; `empty` is the note for no row.
pub(crate) fn print<T: Serialize, const N: usize>(
    rows: &[T],
    json: bool,
    empty: &str,
    columns: [Column; N],
    cells: impl Fn(&T) -> [String; N],
) -> anyhow::Result<u8> {
    if !json && rows.is_empty() {
        eprintln!("countersign: {empty}");
        return Ok(EXIT_ALLOW);
    }
    write(&mut std::io::stdout().lock(), rows, json, &columns, cells)?;
    Ok(EXIT_ALLOW)
}

fn write<T: Serialize, const N: usize>(
    out: &mut impl Write,
    rows: &[T],
    json: bool,
    columns: &[Column; N],
    cells: impl Fn(&T) -> [String; N],
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(rows)?)?;
        return Ok(());
    }
    for line in render(columns, rows.iter().map(cells)) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The table's lines: the header, then the rows.
fn render<const N: usize>(
    columns: &[Column; N],
    rows: impl Iterator<Item = [String; N]>,
) -> Vec<String> {
    let rows: Vec<[String; N]> = rows.collect();
    let mut widths = columns.map(|c| c.title.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(columns.iter().zip(widths))
            .map(|(cell, (column, w))| match column.right {
                true => format!("{cell:>w$}"),
                false => format!("{cell:<w$}"),
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    std::iter::once(line(columns.map(|c| c.title)))
        .chain(rows.iter().map(|r| line(r.each_ref().map(String::as_str))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_counts_line_up_right() {
        let columns = [
            Column::left("NAME"),
            Column::right("USES"),
            Column::left("NOTE"),
        ];
        let rows = [
            [
                "billing-agent".to_owned(),
                "3/10".to_owned(),
                "-".to_owned(),
            ],
            ["ci".to_owned(), "12/100".to_owned(), "é".to_owned()],
        ];
        assert_eq!(
            render(&columns, rows.into_iter()),
            [
                "NAME             USES  NOTE",
                "billing-agent    3/10  -",
                "ci             12/100  é",
            ]
        );
    }

    #[test]
    fn json_prints_the_rows_themselves_and_a_table_their_cells() {
        #[derive(Serialize)]
        struct Row {
            name: &'static str,
            revoked_at: Option<&'static str>,
        }
        let rows = [Row {
            name: "ci",
            revoked_at: None,
        }];
        let columns = [Column::left("NAME"), Column::left("REVOKED")];
        let cells = |r: &Row| [r.name.to_owned(), r.revoked_at.unwrap_or("-").to_owned()];
        let mut out = Vec::new();
        write(&mut out, &rows, true, &columns, cells).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!([{"name": "ci", "revoked_at": null}])
        );
        let mut out = Vec::new();
        write(&mut out, &rows, false, &columns, cells).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "NAME  REVOKED\nci    -\n");
        let mut out = Vec::new();
        write(&mut out, &[] as &[Row], true, &columns, cells).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[]\n");
    }
}
